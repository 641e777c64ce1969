import PropertyBased
import Testing

@testable import Satchel

/// Random tuples biased towards the values that break naive encodings: empty strings, NUL,
/// `/`, `\u{1}`, 0xFF-heavy text, combining marks, astral scalars, integers around 2^53 and the
/// ends of Int64, negative zero, tiny and huge doubles, nested arrays and objects.
enum TupleGen {
    static let edgeStrings: [String] = [
        "", "\0", "\0\0", "a", "a\0", "a\0b", "a\u{1}", "/", "a/b", "//", " ", "é", "e\u{301}", "😀",
        "\u{7F}", "\u{FF}", "\u{FFFF}", "\u{10FFFF}", "ab", "b",
    ]
    static let stringAtoms: [String] = ["\0", "\u{1}", "/", "a", "b", "z", "é", "\u{301}", "😀", "\u{FF}", " ", "\u{FFFD}"]
    static let edgeInts: [Int64] = [
        .min, .min + 1, -(1 << 53) - 1, -(1 << 53), -1025, -1, 0, 1, 2, 1023, 1024, 1 << 53, (1 << 53) + 1,
        (1 << 62) + 1, .max - 1, .max,
    ]
    static let edgeDoubles: [Double] = [
        -0.0, 0.0, 0.5, -0.5, 1.0, -1.0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 1e-300, 1e300, -1e308, 1.7976931348623157e308,
        9_007_199_254_740_992.0, 9_007_199_254_740_994.0, -9_223_372_036_854_775_808.0, 9_223_372_036_854_775_808.0,
    ]

    static func string(_ rng: inout any SeededRandomNumberGenerator) -> String {
        if Bool.random(using: &rng) { return edgeStrings.randomElement(using: &rng)! }
        let n = Int.random(in: 0...6, using: &rng)
        return (0..<n).map { _ in stringAtoms.randomElement(using: &rng)! }.joined()
    }

    static func value(_ rng: inout any SeededRandomNumberGenerator, depth: Int = 0) -> JSONValue {
        let choice = Int.random(in: 0..<(depth < 3 ? 12 : 10), using: &rng)
        switch choice {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(edgeInts.randomElement(using: &rng)!)
        case 3: return .int(Int64.random(in: .min ... .max, using: &rng))
        case 4: return .int(Int64.random(in: -1000...1000, using: &rng))
        case 5: return .double(edgeDoubles.randomElement(using: &rng)!)
        case 6:
            let d = Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &rng))
            return d.isFinite ? .double(d) : .double(Double.random(in: -1e6...1e6, using: &rng))
        case 7, 8, 9: return .string(string(&rng))
        case 10:
            return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in value(&rng, depth: depth + 1) })
        default:
            return .object(
                JSONObject((0..<Int.random(in: 0...3, using: &rng)).map { _ in (string(&rng), value(&rng, depth: depth + 1)) }))
        }
    }

    static func tuple(_ rng: inout any SeededRandomNumberGenerator) -> [JSONValue] {
        (0..<Int.random(in: 0...4, using: &rng)).map { _ in value(&rng) }
    }

    static let tuples = Generator<[JSONValue], Shrink.None<[JSONValue]>>(run: { rng in tuple(&rng) })
    static let values = Generator<JSONValue, Shrink.None<JSONValue>>(run: { rng in value(&rng) })
}

/// The order docs/KEY_LAYOUT.md specifies, written independently of the encoding.
enum ReferenceOrder {
    static func rank(_ v: JSONValue) -> Int {
        switch v {
        case .null: 0
        case .bool(false): 1
        case .bool(true): 2
        case .int, .double: 3
        case .string: 4
        case .array: 5
        case .object: 6
        }
    }

    static func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
        let ra = rank(a), rb = rank(b)
        if ra != rb { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.double(let x), .double(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        // Mixed numbers: the query semantics' exact comparison, which key order must agree with.
        case (.int(let x), .double(let y)): return ValueOrder.compare(x, y)
        case (.double(let x), .int(let y)): return -ValueOrder.compare(y, x)
        case (.string(let x), .string(let y)): return sign(compareBytes(Array(x.utf8), Array(y.utf8)))
        case (.array(let x), .array(let y)): return compare(x, y)
        case (.object(let x), .object(let y)):
            for (m, n) in zip(x, y) {
                let c = compare(.string(m.key), .string(n.key))
                if c != 0 { return c }
                let d = compare(m.value, n.value)
                if d != 0 { return d }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default: return 0
        }
    }

    static func compare(_ a: [JSONValue], _ b: [JSONValue]) -> Int {
        for (x, y) in zip(a, b) {
            let c = compare(x, y)
            if c != 0 { return c }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    static func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    static func sign(_ x: Int) -> Int { x == 0 ? 0 : (x < 0 ? -1 : 1) }
}

@Suite("Key codec")
struct KeyCodecTests {
    @Test("byte order of encoded tuples equals tuple order")
    func orderMatches() async {
        await propertyCheck(count: 3000, input: TupleGen.tuples, TupleGen.tuples) { a, b in
            let ea = Keys.encode(.object, a), eb = Keys.encode(.object, b)
            let expected = ReferenceOrder.compare(a, b)
            #expect(ReferenceOrder.compareBytes(ea, eb) == expected, "\(a) vs \(b)")
        }
    }

    @Test("tuples round-trip through the encoding")
    func roundTrip() async throws {
        await propertyCheck(count: 2000, input: TupleGen.tuples) { tuple in
            let encoded = Keys.encode(.index, tuple)
            let (family, decoded) = try Keys.decode(encoded)
            #expect(family == .index)
            #expect(decoded == tuple)
            #expect(ReferenceOrder.compare(decoded, tuple) == 0)
            #expect(Keys.encode(.index, decoded) == encoded)
        }
    }

    @Test("no element encoding is a prefix of a different element's")
    func prefixFree() async {
        await propertyCheck(count: 3000, input: TupleGen.values, TupleGen.values) { a, b in
            let ea = Keys.encode(.meta, [a]), eb = Keys.encode(.meta, [b])
            if ReferenceOrder.compare(a, b) != 0 {
                #expect(!eb.starts(with: ea), "\(a) encodes to a prefix of \(b)")
            } else {
                #expect(ea == eb)
            }
        }
    }

    @Test("(model, id) keys of different objects never prefix each other")
    func documentKeysArePrefixFree() async {
        let strings = Generator<String, Shrink.None<String>>(run: { rng in TupleGen.string(&rng) })
        await propertyCheck(count: 3000, input: strings, strings, strings) { model, id, other in
            let key = Keys.object(model, id)
            #expect(key.starts(with: Keys.objectPrefix(model)))
            let otherKey = Keys.object(model, other)
            if !UTF8Order.equal(id, other) {
                #expect(!otherKey.starts(with: key))
                #expect(!key.starts(with: otherKey))
            }
            let otherModelPrefix = Keys.objectPrefix(other)
            if !UTF8Order.equal(model, other) { #expect(!key.starts(with: otherModelPrefix)) }
        }
    }

    @Test(
        "integers and doubles share one numeric encoding",
        arguments: [
            (JSONValue.int(1), JSONValue.double(1.0)), (.int(0), .double(-0.0)), (.int(-5), .double(-5.0)),
            (.int(1 << 53), .double(9_007_199_254_740_992.0)),
        ])
    func numericEquality(_ pair: (JSONValue, JSONValue)) throws {
        #expect(Keys.encode(.index, [pair.0]) == Keys.encode(.index, [pair.1]))
    }

    @Test("integers beyond 2^53 stay exact and ordered")
    func largeIntegers() throws {
        let big: Int64 = (1 << 53) + 1
        let a = Keys.encode(.index, [.int(big)])
        let b = Keys.encode(.index, [.double(9_007_199_254_740_992.0)])
        #expect(a != b)
        #expect(ReferenceOrder.compareBytes(b, a) < 0)
        #expect(try Keys.decode(a).1 == [.int(big)])
        for v in [Int64.max, Int64.max - 1, Int64.min, Int64.min + 1] {
            #expect(try Keys.decode(Keys.encode(.index, [.int(v)])).1.first?.isIdentical(to: .int(v)) == true)
        }
    }

    @Test(
        "damaged keys give a corruption error, not a crash",
        arguments: [
            [UInt8]([0x09]), [0x02, 0x30, 0x61], [0x02, 0x30, 0x61, 0x00, 0x07], [0x02, 0x20, 1, 2], [0x02, 0x40],
            [0x02, 0x30, 0xC3, 0x00, 0x01], [0x02, 0x99],
        ])
    func damagedKeys(_ bytes: [UInt8]) {
        #expect(throws: SatchelError.self) { try Keys.decode(bytes) }
        do {
            _ = try Keys.decode(bytes)
        } catch let error as SatchelError {
            #expect(error.code == .corruption)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}
