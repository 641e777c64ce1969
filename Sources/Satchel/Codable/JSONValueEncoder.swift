import Foundation

/// Encodes `Encodable` values straight into ``JSONValue``s — no detour through `Data` and
/// Foundation's JSON coders.
///
/// Default encodings: a `Date` is its ISO 8601 text with milliseconds (finer precision is lost)
/// (`2026-11-24T10:00:00.000Z`), `Data` its base64 text, a `URL` its absolute string, an enum with
/// a raw value its raw value, a nested struct an object. An `Optional` property that is `nil` is
/// encoded as `null` (where Foundation's coders leave it out), so that saving a value removes the
/// attribute: Satchel's null rule.
public struct JSONValueEncoder: Sendable {
    public init() {}

    /// `value` as a JSON value.
    ///
    /// - Throws: `EncodingError` for a value JSON cannot hold (a non-finite number, an unsigned
    ///   integer beyond 64-bit signed range).
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        try EncodingNode.encode(value, path: []).json
    }
}

/// The ISO 8601 form of dates both coders use.
enum CodableDates {
    static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}

/// A value being encoded: containers add children to it in place; ``json`` is the result.
final class EncodingNode {
    enum Kind {
        case value(JSONValue)
        case object([(String, EncodingNode)])
        case array([EncodingNode])
    }

    var kind: Kind = .value(.null)

    init() {}
    init(_ value: JSONValue) { kind = .value(value) }

    var json: JSONValue {
        switch kind {
        case .value(let value): value
        case .object(let members):
            // A key set twice keeps its last value, in its first place.
            .object(
                JSONObject(
                    members.reduce(into: [(String, JSONValue)]()) { result, member in
                        if let index = result.firstIndex(where: { $0.0 == member.0 }) {
                            result[index].1 = member.1.json
                        } else {
                            result.append((member.0, member.1.json))
                        }
                    }))
        case .array(let elements): .array(elements.map(\.json))
        }
    }

    /// `value` encoded at `path`: dates, data, URLs and decimals by the default encodings, the
    /// rest through their own `encode(to:)`.
    static func encode<T: Encodable>(_ value: T, path: [any CodingKey]) throws -> EncodingNode {
        switch value {
        case let date as Date: return EncodingNode(.string(CodableDates.format(date)))
        case let data as Data: return EncodingNode(.string(data.base64EncodedString()))
        case let url as URL: return EncodingNode(.string(url.absoluteString))
        case let decimal as Decimal: return EncodingNode(try number(NSDecimalNumber(decimal: decimal).doubleValue, path: path))
        default:
            let encoder = NodeEncoder(node: EncodingNode(), path: path)
            try value.encode(to: encoder)
            return encoder.node
        }
    }

    static func number(_ value: Double, path: [any CodingKey]) throws -> JSONValue {
        guard value.isFinite else { throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "JSON has no \(value)")) }
        return .double(value)
    }

    static func integer<I: BinaryInteger>(_ value: I, path: [any CodingKey]) throws -> JSONValue {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "\(value) does not fit a 64-bit integer"))
        }
        return .int(exact)
    }

    /// Makes the node an object (once) and adds a member.
    func add(_ key: String, _ child: EncodingNode) {
        if case .object(var members) = kind {
            members.append((key, child))
            kind = .object(members)
        } else {
            kind = .object([(key, child)])
        }
    }

    /// Makes the node an array (once) and appends an element.
    func append(_ child: EncodingNode) {
        if case .array(var elements) = kind {
            elements.append(child)
            kind = .array(elements)
        } else {
            kind = .array([child])
        }
    }

    var count: Int { if case .array(let elements) = kind { elements.count } else { 0 } }
}

final class NodeEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(node: EncodingNode, path: [any CodingKey]) {
        self.node = node
        codingPath = path
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = node.kind {} else { node.kind = .object([]) }
        return KeyedEncodingContainer(KeyedNodeEncoder<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = node.kind {} else { node.kind = .array([]) }
        return UnkeyedNodeEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleNodeEncoder(node: node, codingPath: codingPath) }
}

struct KeyedNodeEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func put(_ value: JSONValue, _ key: Key) { node.add(key.stringValue, EncodingNode(value)) }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try EncodingNode.number(value, path: codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try EncodingNode.number(Double(value), path: codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(try EncodingNode.integer(value, path: codingPath + [key]), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(try EncodingNode.integer(value, path: codingPath + [key]), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        node.add(key.stringValue, try EncodingNode.encode(value, path: codingPath + [key]))
    }

    // A nil optional is a null, so a save removes the attribute (the null rule); synthesized
    // conformances call these for optional properties.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { put(.null, key) } }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { put(.null, key) } }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { put(.null, key) } }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { if let value { try encode(value, forKey: key) } else { put(.null, key) } }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingNode()
        child.kind = .object([])
        node.add(key.stringValue, child)
        return KeyedEncodingContainer(KeyedNodeEncoder<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = EncodingNode()
        child.kind = .array([])
        node.add(key.stringValue, child)
        return UnkeyedNodeEncoder(node: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let child = EncodingNode()
        node.add(key.stringValue, child)
        return NodeEncoder(node: child, path: codingPath + [key])
    }
}

struct UnkeyedNodeEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.count }

    private var index: any CodingKey { IndexKey(intValue: count) }
    private func push(_ value: JSONValue) { node.append(EncodingNode(value)) }

    mutating func encodeNil() throws { push(.null) }
    mutating func encode(_ value: Bool) throws { push(.bool(value)) }
    mutating func encode(_ value: String) throws { push(.string(value)) }
    mutating func encode(_ value: Double) throws { push(try EncodingNode.number(value, path: codingPath + [index])) }
    mutating func encode(_ value: Float) throws { push(try EncodingNode.number(Double(value), path: codingPath + [index])) }
    mutating func encode(_ value: Int) throws { push(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { push(.int(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { node.append(try EncodingNode.encode(value, path: codingPath + [index])) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingNode()
        child.kind = .object([])
        let path = codingPath + [index]
        node.append(child)
        return KeyedEncodingContainer(KeyedNodeEncoder<NestedKey>(node: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = EncodingNode()
        child.kind = .array([])
        let path = codingPath + [index]
        node.append(child)
        return UnkeyedNodeEncoder(node: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let child = EncodingNode()
        let path = codingPath + [index]
        node.append(child)
        return NodeEncoder(node: child, path: path)
    }
}

struct SingleNodeEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.kind = .value(.null) }
    mutating func encode(_ value: Bool) throws { node.kind = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { node.kind = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { node.kind = .value(try EncodingNode.number(value, path: codingPath)) }
    mutating func encode(_ value: Float) throws { node.kind = .value(try EncodingNode.number(Double(value), path: codingPath)) }
    mutating func encode(_ value: Int) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { node.kind = .value(.int(value)) }
    mutating func encode(_ value: UInt) throws { node.kind = .value(try EncodingNode.integer(value, path: codingPath)) }
    mutating func encode(_ value: UInt8) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { node.kind = .value(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { node.kind = .value(try EncodingNode.integer(value, path: codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        let child = try EncodingNode.encode(value, path: codingPath)
        node.kind = child.kind
    }
}

/// An array position as a coding key.
struct IndexKey: CodingKey {
    var stringValue: String { "[\(intValue ?? 0)]" }
    var intValue: Int?
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}
