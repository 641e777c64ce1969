import Foundation
import PropertyBased
import Testing

@testable import Satchel

private func parseError(_ text: [UInt8]) -> SatchelError? {
    do {
        _ = try JSONValue(parsing: text)
        return nil
    } catch let error as SatchelError {
        return error
    } catch {
        return nil
    }
}

@Suite("JSON codec")
struct JSONTests {
    @Test("values round-trip through text exactly")
    func roundTrip() async throws {
        await propertyCheck(count: 2000, input: TupleGen.values) { value in
            let text = value.jsonBytes
            let parsed = try JSONValue(parsing: text)
            #expect(parsed.isIdentical(to: value), "\(value)")
            #expect(parsed.jsonBytes == text)
        }
    }

    @Test("Foundation reads what Satchel writes, to the same values")
    func foundationAgrees() async throws {
        await propertyCheck(count: 500, input: TupleGen.values) { value in
            // Foundation's [String: Any] merges canonically equivalent keys ("é" and "e\u{301}");
            // Satchel keeps both. That difference is documented, not tested here.
            if Self.hasCanonicallyEquivalentKeys(value) { return }
            let text = Data(JSONValue.array([value]).jsonBytes)
            let foundation = try JSONSerialization.jsonObject(with: text, options: [.fragmentsAllowed])
            let read = try #require(Self.fromFoundation(foundation))
            #expect(Self.agrees(read, JSONValue.array([value])), "\(value)")
        }
    }

    /// Equal, except that Foundation on Linux reads integers beyond 2^53 as (rounded) doubles and
    /// misrounds some doubles by a few units in the last place: reasons Satchel has its own codec.
    static func agrees(_ foundation: JSONValue, _ ours: JSONValue) -> Bool {
        switch (foundation, ours) {
        case (.double(let d), .int(let i)): return agrees(.double(d), .double(Double(i)))
        case (.double(let a), .double(let b)): return a == b || abs(a - b) <= abs(b) * 1e-14
        case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { agrees($0, $1) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && agrees($0.value, $1.value) }
        default: return foundation == ours
        }
    }

    static func hasCanonicallyEquivalentKeys(_ value: JSONValue) -> Bool {
        switch value {
        case .array(let elements): return elements.contains(where: hasCanonicallyEquivalentKeys)
        case .object(let object):
            return Set(object.keys).count < object.count || object.contains { hasCanonicallyEquivalentKeys($0.value) }
        default: return false
        }
    }

    /// Foundation's parse result as a JSONValue (numbers as Foundation typed them).
    static func fromFoundation(_ any: Any) -> JSONValue? {
        switch any {
        case is NSNull: return .null
        case let s as String: return .string(s)
        case let a as [Any]:
            let elements = a.compactMap(fromFoundation)
            return elements.count == a.count ? .array(elements) : nil
        case let d as [String: Any]:
            let members = d.compactMap { k, v in fromFoundation(v).map { (k, $0) } }
            return members.count == d.count ? .object(JSONObject(members)) : nil
        case let n as NSNumber:
            switch String(cString: n.objCType) {
            case "c", "B": return .bool(n.boolValue)
            case "d", "f": return .double(n.doubleValue)
            default: return .int(n.int64Value)
            }
        default: return nil
        }
    }

    @Test("compact output, sorted keys, minimal escapes")
    func output() throws {
        let value: JSONValue = ["b": [1, 2.5, "x\"y\\z\n\u{1}"], "a": .null, "é": true, "Z": ["k": false]]
        #expect(value.description == #"{"Z":{"k":false},"a":null,"b":[1,2.5,"x\"y\\z\n\u0001"],"é":true}"#)
        #expect(JSONValue.double(1).description == "1.0")
        #expect(JSONValue.double(1e16).description == "1e+16")
        #expect(JSONValue.int(.min).description == "-9223372036854775808")
    }

    @Test("integers are exact to 64 bits; larger ones become doubles")
    func numbers() throws {
        #expect(try JSONValue(parsing: "9223372036854775807").isIdentical(to: .int(.max)))
        #expect(try JSONValue(parsing: "-9223372036854775808").isIdentical(to: .int(.min)))
        #expect(try JSONValue(parsing: "9223372036854775808").isIdentical(to: .double(9_223_372_036_854_775_808.0)))
        #expect(try JSONValue(parsing: "9007199254740993").isIdentical(to: .int(9_007_199_254_740_993)))
        #expect(try JSONValue(parsing: "1.0").isIdentical(to: .double(1)))
        #expect(try JSONValue(parsing: "-0").isIdentical(to: .int(0)))
        #expect(try JSONValue(parsing: "1E2").isIdentical(to: .double(100)))
        #expect(JSONValue.int(9_007_199_254_740_993) != .double(9_007_199_254_740_992.0))
        #expect(JSONValue.int(1) == .double(1.0))
        #expect(JSONValue.double(-0.0) == .int(0))
        #expect(JSONValue.bool(true) != .int(1))
    }

    @Test("strings compare by Unicode scalars, not canonical equivalence")
    func scalarEquality() throws {
        let nfc: JSONValue = "caf\u{E9}", nfd: JSONValue = "cafe\u{301}"
        #expect(nfc != nfd)
        let object: JSONObject = ["caf\u{E9}": 1, "cafe\u{301}": 2]
        #expect(object.count == 2)
        #expect(object["cafe\u{301}"] == 2)
        #expect(Set([nfc, nfd]).count == 2)
    }

    @Test("a name given twice keeps its last value")
    func duplicateNames() throws {
        #expect(try JSONObject(parsing: #"{"a":1,"b":2,"a":3}"#) == ["a": 3, "b": 2])
    }

    @Test(
        "malformed input gives a typed error with its position",
        arguments: [
            ("", "unexpected end"), ("{", "unterminated"), ("[1,]", "unexpected character"), ("{\"a\" 1}", "expected ':'"),
            ("{'a':1}", "expected a string key"), ("[1 2]", "expected ','"), ("01", "leading zeros"), ("1.", "after '.'"),
            ("1e", "exponent"), ("-", "expected a digit"), ("nul", "unexpected end"), ("nulx", "invalid literal"),
            ("\"abc", "unterminated string"), ("\"a\tb\"", "control character"), ("\"\\x\"", "invalid escape"),
            ("\"\\ud800\"", "lone high surrogate"), ("\"\\udc00\"", "lone low surrogate"), ("\"\\u12\"", "truncated"),
            ("1e999", "out of range"), ("[1] x", "after the JSON value"), ("NaN", "unexpected character"), ("{} {}", "after"),
        ])
    func malformed(_ testCase: (String, String)) {
        let error = parseError(Array(testCase.0.utf8))
        #expect(error?.code == .malformedJSON)
        #expect(error?.message.contains(testCase.1) == true, "\(String(describing: error))")
        #expect(error?.message.contains("at byte") == true)
    }

    @Test(
        "invalid UTF-8 is refused",
        arguments: [
            [UInt8]([0x22, 0xFF, 0x22]), [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0x5C, 0x6E, 0xC0, 0xAF, 0x22],
        ])
    func invalidUTF8(_ bytes: [UInt8]) {
        let error = parseError(bytes)
        #expect(error?.code == .malformedJSON)
        #expect(error?.message.contains("UTF-8") == true)
    }

    @Test("nesting 10,000 deep is refused with a clear error, not a stack overflow")
    func deepNesting() async throws {
        // Run on a task thread (smaller stack than the main thread).
        let error = await Task.detached {
            parseError(Array(repeating: UInt8(ascii: "["), count: 10_000) + Array(repeating: UInt8(ascii: "]"), count: 10_000))
        }.value
        #expect(error?.code == .malformedJSON)
        #expect(error?.message.contains("nesting deeper than 256 levels") == true)
        let objects = String(repeating: #"{"a":"#, count: 10_000) + "1" + String(repeating: "}", count: 10_000)
        #expect(parseError(Array(objects.utf8))?.message.contains("nesting deeper") == true)
    }

    @Test("nesting up to the limit round-trips")
    func nestingAtTheLimit() throws {
        let depth = JSONValue.maxDepth
        let text = String(repeating: "[", count: depth) + "7" + String(repeating: "]", count: depth)
        let value = try JSONValue(parsing: text)
        #expect(value.depth == depth)
        #expect(String(decoding: value.jsonBytes, as: UTF8.self) == text)
        #expect(parseError(Array(("[" + text + "]").utf8))?.code == .malformedJSON)
    }

    @Test("a 5 MB string round-trips")
    func hugeString() throws {
        let big = String(repeating: "abcdé\u{1F600}\"\\", count: 5_000_000 / 14)
        let value = JSONValue.array([.string(big)])
        #expect(try JSONValue(parsing: value.jsonBytes).isIdentical(to: value))
    }

    @Test("a non-object where an object is expected is an invalid object")
    func notAnObject() {
        for text in ["[]", "1", "\"x\"", "null", "true"] {
            #expect {
                _ = try JSONObject(parsing: text)
            } throws: { error in
                (error as? SatchelError)?.code == .invalidObject
            }
        }
    }
}
