/// The one file that owns every key byte layout of a Satchel partition (see docs/KEY_LAYOUT.md).
///
/// A key is a *family byte* followed by a tuple of elements in an order-preserving encoding:
/// comparing two keys with `memcmp` (LevelDB's default bytewise comparator) gives the same answer
/// as comparing their tuples element by element, with the total order
/// null < false < true < numbers < strings < arrays < objects.
///
/// | element | bytes |
/// | --- | --- |
/// | null | `05` |
/// | false / true | `06` / `07` |
/// | number | `20`, 8 bytes: the value rounded down to a double, sign-flipped big-endian; 2 bytes: the integer remainder (big-endian) |
/// | string | `30`, UTF-8 with `00` written as `00 FF`, then the terminator `00 01` |
/// | array | `40`, the elements, then `00` |
/// | object | `50`, then name (as a string element) and value for each member in name byte order, then `00` |
///
/// Every element encoding is prefix-free, so no tuple's encoding is a prefix of another's unless
/// the tuple itself is a prefix; scanning "all keys starting with (family, model)" can never reach
/// another model, whatever bytes its name holds. Integers and doubles share one encoding: `1` and
/// `1.0` give the same bytes (they are equal under Satchel's query semantics), while integers
/// beyond 2^53 stay exact through the remainder bytes.
enum KeyCodec {
    enum Tag {
        static let null: UInt8 = 0x05
        static let `false`: UInt8 = 0x06
        static let `true`: UInt8 = 0x07
        static let number: UInt8 = 0x20
        static let string: UInt8 = 0x30
        static let array: UInt8 = 0x40
        static let object: UInt8 = 0x50
        /// Ends an array or an object.
        static let end: UInt8 = 0x00
    }

    /// Byte length of an encoded number element, tag included.
    static let numberLength = 11

    /// The double at or below `v`, and the non-negative remainder `v - double` (below 1024).
    @inline(__always)
    static func splitInteger(_ v: Int64) -> (Double, UInt16) {
        var d = Double(v)  // rounds to nearest; step down when that rounded up
        if d >= 9_223_372_036_854_775_808.0 || Int64(d) > v { d = d.nextDown }
        return (d, UInt16(v - Int64(d)))
    }

    @inline(__always)
    static func orderedBits(_ d: Double) -> UInt64 {
        let bits = (d == 0 ? 0.0 : d).bitPattern  // -0.0 and 0.0 encode alike
        return bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    }

    @inline(__always)
    static func double(fromOrderedBits bits: UInt64) -> Double {
        Double(bitPattern: bits & (1 << 63) != 0 ? bits & ~(1 << 63) : ~bits)
    }
}

// MARK: - Encoding

/// Builds one key: a family byte, then tuple elements.
struct KeyEncoder {
    private(set) var bytes: [UInt8]

    init(_ family: KeyFamily, capacity: Int = 48) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(family.rawValue)
    }

    /// Starts from an existing prefix (itself a family byte plus whole elements), with room for
    /// `more` bytes after it: one allocation where appending to the prefix's shared storage
    /// would copy it and then grow the copy.
    init(prefix: [UInt8], reserving more: Int) {
        bytes = []
        bytes.reserveCapacity(prefix.count + more)
        bytes.append(contentsOf: prefix)
    }

    /// Starts empty, for encoding bare elements (sort keys, key fragments).
    init() { bytes = [] }

    /// The bytes every string element starting with `prefix` starts with: the tag and the
    /// escaped text, without the terminator.
    static func stringPrefixBytes(_ prefix: String) -> [UInt8] {
        var encoder = KeyEncoder()
        encoder.append(prefix)
        return Array(encoder.bytes.dropLast(2))
    }

    /// The encoding of one element on its own.
    static func valueBytes(_ value: JSONValue) -> [UInt8] {
        var encoder = KeyEncoder()
        encoder.append(value)
        return encoder.bytes
    }

    @inline(__always)
    mutating func append(_ string: String) {
        bytes.append(KeyCodec.Tag.string)
        appendEscaped(string)
    }

    @inline(__always)
    private mutating func appendEscaped(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count where utf8[i] == 0 {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...i]))
                bytes.append(0xFF)
                runStart = i + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(0x00)
        bytes.append(0x01)
    }

    mutating func append(_ value: Int64) {
        let (d, r) = KeyCodec.splitInteger(value)
        appendNumber(d, remainder: r)
    }

    mutating func append(_ value: Double) { appendNumber(value, remainder: 0) }

    private mutating func appendNumber(_ d: Double, remainder: UInt16) {
        bytes.append(KeyCodec.Tag.number)
        let bits = KeyCodec.orderedBits(d)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        bytes.append(UInt8(remainder >> 8))
        bytes.append(UInt8(remainder & 0xFF))
    }

    mutating func append(_ value: JSONValue) {
        switch value {
        case .null: bytes.append(KeyCodec.Tag.null)
        case .bool(let b): bytes.append(b ? KeyCodec.Tag.true : KeyCodec.Tag.false)
        case .int(let i): append(i)
        case .double(let d): append(d)
        case .string(let s): append(s)
        case .array(let elements):
            bytes.append(KeyCodec.Tag.array)
            for element in elements { append(element) }
            bytes.append(KeyCodec.Tag.end)
        case .object(let object):
            bytes.append(KeyCodec.Tag.object)
            for (name, member) in object {
                append(name)
                append(member)
            }
            bytes.append(KeyCodec.Tag.end)
        }
    }
}

// MARK: - Decoding

/// Reads tuple elements back from key bytes.
struct KeyDecoder {
    private let bytes: UnsafeRawBufferPointer
    private(set) var position: Int
    /// Arrays and objects open around the element being read: each level is a call deeper, so
    /// damaged bytes (a run of `40`s) could otherwise overflow the stack. No encoder nests
    /// deeper than a JSON value may (``JSONValue/maxDepth``).
    private var depth = 0

    init(_ bytes: UnsafeRawBufferPointer, from position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    var isAtEnd: Bool { position >= bytes.count }

    private func corrupt(_ reason: String) -> SatchelError {
        SatchelError(.corruption, "undecodable key at byte \(position): \(reason)")
    }

    /// Opens one more level of nesting, refusing more than a JSON value may hold.
    private mutating func enter() throws(SatchelError) {
        guard depth < JSONValue.maxDepth else { throw corrupt("nesting deeper than \(JSONValue.maxDepth) levels") }
        depth += 1
    }

    mutating func readFamily() throws(SatchelError) -> KeyFamily {
        guard position < bytes.count, let family = KeyFamily(rawValue: bytes[position]) else {
            throw corrupt("unknown key family")
        }
        position += 1
        return family
    }

    mutating func readString() throws(SatchelError) -> String {
        guard position < bytes.count, bytes[position] == KeyCodec.Tag.string else { throw corrupt("expected a string") }
        position += 1
        return try readEscapedString()
    }

    private mutating func readEscapedString() throws(SatchelError) -> String {
        // Fast path: no escaped NUL before the terminator, so the bytes are the string's.
        var j = position
        var ascii = true
        while j + 1 < bytes.count {
            let b = bytes[j]
            if b == 0 {
                guard bytes[j + 1] == 0x01 else { break }  // an escape: take the slow path
                let text = UnsafeRawBufferPointer(rebasing: bytes[position..<j])
                position = j + 2
                if ascii { return String(decoding: text, as: UTF8.self) }
                guard let s = String(validating: text.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
                    throw corrupt("invalid UTF-8")
                }
                return s
            }
            if b >= 0x80 { ascii = false }
            j += 1
        }
        var out: [UInt8] = []
        var i = position
        while i < bytes.count {
            let b = bytes[i]
            if b != 0 {
                out.append(b)
                i += 1
                continue
            }
            guard i + 1 < bytes.count else { break }
            switch bytes[i + 1] {
            case 0xFF:
                out.append(0)
                i += 2
            case 0x01:
                position = i + 2
                guard let s = String(validating: out, as: UTF8.self) else { throw corrupt("invalid UTF-8") }
                return s
            default:
                throw corrupt("invalid escape in a string")
            }
        }
        throw corrupt("unterminated string")
    }

    /// Moves past one element without building it.
    mutating func skipValue() throws(SatchelError) {
        guard position < bytes.count else { throw corrupt("missing element") }
        let tag = bytes[position]
        switch tag {
        case KeyCodec.Tag.null, KeyCodec.Tag.false, KeyCodec.Tag.true: position += 1
        case KeyCodec.Tag.number:
            guard bytes.count - position >= KeyCodec.numberLength else { throw corrupt("truncated number") }
            position += KeyCodec.numberLength
        case KeyCodec.Tag.string:
            position += 1
            var i = position
            while i + 1 < bytes.count {
                if bytes[i] == 0 {
                    if bytes[i + 1] == 0x01 {
                        position = i + 2
                        return
                    }
                    guard bytes[i + 1] == 0xFF else { throw corrupt("invalid escape in a string") }
                    i += 2
                } else {
                    i += 1
                }
            }
            throw corrupt("unterminated string")
        case KeyCodec.Tag.array, KeyCodec.Tag.object:
            try enter()
            position += 1
            while true {
                guard position < bytes.count else { throw corrupt("unterminated container") }
                if bytes[position] == KeyCodec.Tag.end {
                    position += 1
                    depth -= 1
                    return
                }
                try skipValue()
            }
        default:
            throw corrupt("unknown element tag 0x\(String(tag, radix: 16))")
        }
    }

    mutating func readValue() throws(SatchelError) -> JSONValue {
        guard position < bytes.count else { throw corrupt("missing element") }
        let tag = bytes[position]
        position += 1
        switch tag {
        case KeyCodec.Tag.null: return .null
        case KeyCodec.Tag.false: return .bool(false)
        case KeyCodec.Tag.true: return .bool(true)
        case KeyCodec.Tag.number:
            guard bytes.count - position >= KeyCodec.numberLength - 1 else { throw corrupt("truncated number") }
            var bits: UInt64 = 0
            for i in 0..<8 { bits = bits << 8 | UInt64(bytes[position + i]) }
            let remainder = UInt16(bytes[position + 8]) << 8 | UInt16(bytes[position + 9])
            let d = KeyCodec.double(fromOrderedBits: bits)
            // The encoder writes JSON's numbers only: bits that read as a NaN or an infinity are
            // damage, and such a value could be neither compared nor written as JSON.
            guard d.isFinite else { throw corrupt("not a finite number") }
            position += 10
            if let i = JSONNumber.exactInt64(d) {
                let (sum, overflow) = i.addingReportingOverflow(Int64(remainder))
                if overflow { throw corrupt("number out of range") }
                return .int(sum)
            }
            if remainder != 0 { throw corrupt("remainder on a non-integral number") }
            return .double(d)
        case KeyCodec.Tag.string: return .string(try readEscapedString())
        case KeyCodec.Tag.array:
            try enter()
            var elements: [JSONValue] = []
            while true {
                guard position < bytes.count else { throw corrupt("unterminated array") }
                if bytes[position] == KeyCodec.Tag.end {
                    position += 1
                    depth -= 1
                    return .array(elements)
                }
                elements.append(try readValue())
            }
        case KeyCodec.Tag.object:
            try enter()
            var members: [JSONObject.Member] = []
            while true {
                guard position < bytes.count else { throw corrupt("unterminated object") }
                if bytes[position] == KeyCodec.Tag.end {
                    position += 1
                    depth -= 1
                    return .object(JSONObject(unsortedMembers: members))
                }
                let name = try readString()
                members.append(JSONObject.Member(name: name, value: try readValue()))
            }
        default:
            position -= 1
            throw corrupt("unknown element tag 0x\(String(tag, radix: 16))")
        }
    }
}

// MARK: - Key families

/// The first byte of every key: which kind of record it is.
enum KeyFamily: UInt8, CaseIterable {
    /// `(meta, name, …)`: format version, model and index definitions, per-model statistics, sync
    /// states, unfinished rewrites, migrations applied and under way, the session.
    case meta = 0x01
    /// `(obj, model, objectId)` → the object's attributes as compact JSON.
    case object = 0x02
    /// `(idx, model, indexId, values…, objectId)`: one secondary index entry. A value index that
    /// stores objects (the default) holds a copy of the object's value; a keys-only or
    /// array-element index entry is empty.
    case index = 0x03
    /// `(chg, model, objectId)` → the pending local change (see ``PendingChange``).
    case change = 0x04
    /// `(out, model, objectId)` → a change pushed to the server, its outcome not yet known.
    case inFlight = 0x05
    /// `(err, model, objectId)` → a change the server refused, kept until the app resolves it.
    case error = 0x06
    /// `(ver, model, objectId)` → the object's version on the server (an ETag, a timestamp…) when
    /// its record does not carry it: the object is gone with a delete to push, or an earlier
    /// format stored it so (`StoredObject.swift`).
    case version = 0x07
}

/// Constructors for every key Satchel writes. Nothing outside this file builds key bytes.
enum Keys {
    /// Version of the on-disk layout written by this code. Format 2 lets an object's record carry
    /// its server version; every format-1 store is a format-2 store (its versions are all in
    /// version records), so opening one only raises its marker.
    static let formatVersion: Int64 = 2

    /// `(meta, "format")` → the layout version as JSON (`2`).
    static var format: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("format")
        return k.bytes
    }

    /// `(meta, "model", name)` → the model definition as JSON.
    static func modelDefinition(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("model")
        k.append(model)
        return k.bytes
    }

    /// Prefix of all model definitions.
    static var modelDefinitionPrefix: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("model")
        return k.bytes
    }

    /// `(meta, "stats", name)` → the model's statistics as JSON.
    static func modelStatistics(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("stats")
        k.append(model)
        return k.bytes
    }

    /// Prefix of every model's statistics.
    static var modelStatisticsPrefix: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("stats")
        return k.bytes
    }

    /// The prefixes of what every open reads (format, catalog, unfinished migrations and
    /// rewrites), which a clean close keeps in its record for the next open.
    static var readByOpen: [[UInt8]] {
        [format, modelDefinitionPrefix, modelStatisticsPrefix, indexDefinitionPrefix, migratingPrefix, rewritePrefix]
    }

    /// `(meta, "index", model, indexId)` → the index definition as JSON. The index id is written
    /// as a decimal string (4 bytes for small ids, where a number element takes 11).
    static func indexDefinition(_ model: String, _ id: Int) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("index")
        k.append(model)
        k.append(String(id))
        return k.bytes
    }

    /// Prefix of every index definition of every model.
    static var indexDefinitionPrefix: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("index")
        return k.bytes
    }

    /// `(idx, model, indexId)`: the prefix of every entry of one index. A value index's entry
    /// continues with the fields' values (null for a missing field) and the object id.
    static func indexPrefix(_ model: String, _ id: Int) -> [UInt8] {
        var k = KeyEncoder(.index, capacity: model.utf8.count + 48)
        k.append(model)
        k.append(String(id))
        return k.bytes
    }

    /// `(idx, model, indexId, false)`: where an array-element index keeps array elements.
    static func indexElementsPrefix(_ indexPrefix: [UInt8]) -> [UInt8] { indexPrefix + [KeyCodec.Tag.false] }

    /// `(idx, model, indexId, true)`: where an array-element index keeps string values (so that
    /// `contains` can also find substrings).
    static func indexStringsPrefix(_ indexPrefix: [UInt8]) -> [UInt8] { indexPrefix + [KeyCodec.Tag.true] }

    /// The bytes reserved after an index's prefix for the rest of an entry's key: the id, and 24
    /// for the tags and terminators and a value as long as a number or a short string, so that
    /// the key is built in one allocation (a longer value grows it once more).
    private static func entryRoom(_ objectID: String) -> Int { objectID.utf8.count + 24 }

    /// `(idx, model, indexId, v1[, v2 …], objectId)`: a value index entry (a missing field is null).
    static func indexValueEntry(_ indexPrefix: [UInt8], values: some Sequence<JSONValue>, objectID: String) -> [UInt8] {
        var k = KeyEncoder(prefix: indexPrefix, reserving: entryRoom(objectID))
        for value in values { k.append(value) }
        k.append(objectID)
        return k.bytes
    }

    /// `(idx, model, indexId, false, element, objectId)`.
    static func indexElementEntry(_ indexPrefix: [UInt8], element: JSONValue, objectID: String) -> [UInt8] {
        var k = KeyEncoder(prefix: indexPrefix, reserving: entryRoom(objectID) + 1)
        k.append(.bool(false))
        k.append(element)
        k.append(objectID)
        return k.bytes
    }

    /// `(idx, model, indexId, true, string, objectId)`.
    static func indexStringEntry(_ indexPrefix: [UInt8], string: String, objectID: String) -> [UInt8] {
        var k = KeyEncoder(prefix: indexPrefix, reserving: entryRoom(objectID) + 1 + string.utf8.count)
        k.append(.bool(true))
        k.append(string)
        k.append(objectID)
        return k.bytes
    }

    /// `(idx, model)`: the prefix of every index entry of `model`.
    static func indexModelPrefix(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.index)
        k.append(model)
        return k.bytes
    }

    /// The trailing object id of an index entry, skipping `valueCount` values after the prefix.
    static func objectID(fromIndexEntry key: UnsafeRawBufferPointer, prefixLength: Int, valueCount: Int) throws(SatchelError) -> String {
        var decoder = KeyDecoder(key, from: prefixLength)
        for _ in 0..<valueCount { try decoder.skipValue() }
        let id = try decoder.readString()
        guard decoder.isAtEnd else { throw SatchelError(.corruption, "trailing bytes after an object id in an index key") }
        return id
    }

    /// `(obj, model)`: the prefix of every object of `model`.
    static func objectPrefix(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.object, capacity: model.utf8.count + 40)
        k.append(model)
        return k.bytes
    }

    /// `(obj, model, objectId)`.
    static func object(_ model: String, _ id: String) -> [UInt8] {
        var k = KeyEncoder(.object, capacity: model.utf8.count + id.utf8.count + 8)
        k.append(model)
        k.append(id)
        return k.bytes
    }

    /// `(obj, model, objectId)` built on a prefix from ``objectPrefix(_:)``.
    static func object(prefix: [UInt8], _ id: String) -> [UInt8] {
        // The id's tag, its bytes and its terminator (an id holding zero bytes grows it).
        var k = KeyEncoder(prefix: prefix, reserving: id.utf8.count + 3)
        k.append(id)
        return k.bytes
    }

    /// `(chg, model)`: the prefix of every pending change of `model`.
    static func changePrefix(_ model: String) -> [UInt8] { objectRecordPrefix(.change, model) }

    /// `(chg, model, objectId)`.
    static func change(_ model: String, _ id: String) -> [UInt8] { objectRecord(.change, model, id) }

    /// `(family, model)`: the prefix of every per-object record of `family` for `model`
    /// (objects, pending changes, changes in flight, errors, versions).
    static func objectRecordPrefix(_ family: KeyFamily, _ model: String) -> [UInt8] {
        var k = KeyEncoder(family, capacity: model.utf8.count + 8)
        k.append(model)
        return k.bytes
    }

    /// `(family, model, objectId)`.
    static func objectRecord(_ family: KeyFamily, _ model: String, _ id: String) -> [UInt8] {
        var k = KeyEncoder(family, capacity: model.utf8.count + id.utf8.count + 8)
        k.append(model)
        k.append(id)
        return k.bytes
    }

    /// `(meta, "sync", model)` → the model's sync state as JSON: cursor, full-pull and initial-sync
    /// flags, last sync time, the server's metadata (see ``ModelSyncState``).
    static func syncState(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("sync")
        k.append(model)
        return k.bytes
    }

    /// `(meta, "rewrite", model, stamp)` → an unfinished rewrite of the references, in other
    /// partitions, to objects of `model` that were given new ids: `{"renames":{old:new,…}}`.
    /// Written in the batch of the renames, deleted once those references are rewritten.
    static func rewrite(_ model: String, _ stamp: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("rewrite")
        k.append(model)
        k.append(stamp)
        return k.bytes
    }

    /// `(meta, "rewrite")`: every unfinished rewrite.
    static var rewritePrefix: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("rewrite")
        return k.bytes
    }

    /// `(meta, "migration", model, name)` → a migration applied to the model, as JSON:
    /// `{"order":n,"applied":ISO 8601 time,"changed":n,"deleted":n}` (see `Migration.swift`).
    static func migration(_ model: String, _ name: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("migration")
        k.append(model)
        k.append(name)
        return k.bytes
    }

    /// `(meta, "migration", model)`: every migration applied to the model.
    static func migrationPrefix(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("migration")
        k.append(model)
        return k.bytes
    }

    /// `(meta, "migrating", model)` → the migration of the model under way, as JSON: its name,
    /// the id of the last object rewritten (`cursor`), whether every object is done, counts, and
    /// its steps when they have a JSON form (so that the next open finishes it). Written in the
    /// batch of each chunk of objects; deleted in the batch that records the migration applied.
    static func migrating(_ model: String) -> [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("migrating")
        k.append(model)
        return k.bytes
    }

    /// `(meta, "migrating")`: every migration under way.
    static var migratingPrefix: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("migrating")
        return k.bytes
    }

    /// `(meta, "session")` → the sync session as JSON (user partition).
    static var session: [UInt8] {
        var k = KeyEncoder(.meta)
        k.append("session")
        return k.bytes
    }

    /// The smallest key greater than every key that starts with `prefix` (for range ends).
    /// Prefixes here never end in `FF`-only runs that overflow: they end in a terminator.
    static func prefixEnd(_ prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0xFF]
    }

    // MARK: - Ranges of index entries (the planner's)

    /// The values a range reads one type class of: numbers, strings or booleans.
    enum TypeClass { case number, string, bool }

    /// The first key, and the first key past the last, of the entries after `prefix` whose next
    /// element is of `typeClass` (booleans: `false` and `true`).
    static func typeClassRange(after prefix: [UInt8], _ typeClass: TypeClass) -> (start: [UInt8], end: [UInt8]) {
        let (low, high): (UInt8, UInt8) =
            switch typeClass {
            case .number: (KeyCodec.Tag.number, KeyCodec.Tag.number + 1)
            case .string: (KeyCodec.Tag.string, KeyCodec.Tag.string + 1)
            case .bool: (KeyCodec.Tag.false, KeyCodec.Tag.true + 1)
            }
        return (prefix + [low], prefix + [high])
    }

    /// Where a range of entries after `prefix` starts (a `lower` bound) or ends (an upper one)
    /// at `value`: at its first entry or past its last, as the bound is inclusive or not.
    static func bound(after prefix: [UInt8], _ value: JSONValue, inclusive: Bool, lower: Bool) -> [UInt8] {
        let key = element(after: prefix, value)
        return lower == inclusive ? key : prefixEnd(key)
    }

    /// The entries after `prefix` whose next element is `value`.
    static func element(after prefix: [UInt8], _ value: JSONValue) -> [UInt8] { prefix + KeyEncoder.valueBytes(value) }

    /// The entries after `prefix` whose next element is a string starting with `text`.
    static func stringPrefix(after prefix: [UInt8], _ text: String) -> [UInt8] { prefix + KeyEncoder.stringPrefixBytes(text) }

    /// The entries after `prefix` whose next element is `null` (a value index's missing values).
    static func null(after prefix: [UInt8]) -> [UInt8] { prefix + [KeyCodec.Tag.null] }

    /// Reads the trailing object id of a `(family, model, objectId)` key whose first
    /// `prefixLength` bytes are the `(family, model)` prefix.
    static func objectID(fromKey key: UnsafeRawBufferPointer, prefixLength: Int) throws(SatchelError) -> String {
        var decoder = KeyDecoder(key, from: prefixLength)
        let id = try decoder.readString()
        guard decoder.isAtEnd else { throw SatchelError(.corruption, "trailing bytes after an object id in a key") }
        return id
    }

    /// Decodes a whole key into its family and elements (for `check` and tests).
    static func decode(_ key: [UInt8]) throws -> (KeyFamily, [JSONValue]) {
        try key.withUnsafeBytes { raw in
            var decoder = KeyDecoder(raw)
            let family = try decoder.readFamily()
            var elements: [JSONValue] = []
            while !decoder.isAtEnd { elements.append(try decoder.readValue()) }
            return (family, elements)
        }
    }

    /// Encodes a whole key from a family and elements (for tests and tools).
    static func encode(_ family: KeyFamily, _ elements: [JSONValue]) -> [UInt8] {
        var k = KeyEncoder(family)
        for element in elements { k.append(element) }
        return k.bytes
    }
}

// MARK: - Decoding, for tools

/// The key decoder's entry points on arbitrary bytes, for tools outside the module (the fuzz
/// targets of Tests/Fuzz): each runs the code Satchel itself reads keys back with, so a key
/// that no encoder wrote gives a `corruption` error there as it does in a store.
package enum KeyBytes {
    /// The family byte and the elements of a whole key, as `check` reads them.
    package static func decode(_ key: [UInt8]) throws -> (family: UInt8, elements: [JSONValue]) {
        let (family, elements) = try Keys.decode(key)
        return (family.rawValue, elements)
    }

    /// The key of a family byte and elements; nil for a byte that names no family.
    package static func encode(family: UInt8, _ elements: [JSONValue]) -> [UInt8]? {
        KeyFamily(rawValue: family).map { Keys.encode($0, elements) }
    }

    /// Where each element after the family byte ends: found by reading each element (as a scan
    /// reads an entry's values), or by skipping it without building it (as an index read skips
    /// the values before an entry's object id).
    package static func elementEnds(_ key: [UInt8], skipping: Bool) throws(SatchelError) -> [Int] {
        try withBytes(of: key) { raw throws(SatchelError) in
            var decoder = KeyDecoder(raw)
            _ = try decoder.readFamily()
            var ends: [Int] = []
            while !decoder.isAtEnd {
                if skipping { try decoder.skipValue() } else { _ = try decoder.readValue() }
                ends.append(decoder.position)
            }
            return ends
        }
    }

    /// The object id ending a `(family, model, objectId)` key whose prefix is `prefixLength`
    /// bytes long.
    package static func objectID(fromKey key: [UInt8], prefixLength: Int) throws(SatchelError) -> String {
        try withBytes(of: key) { raw throws(SatchelError) in try Keys.objectID(fromKey: raw, prefixLength: prefixLength) }
    }

    /// The object id ending an index entry, after `valueCount` values that follow the
    /// `prefixLength` bytes of the index's prefix.
    package static func objectID(fromIndexEntry key: [UInt8], prefixLength: Int, valueCount: Int) throws(SatchelError) -> String {
        try withBytes(of: key) { raw throws(SatchelError) in
            try Keys.objectID(fromIndexEntry: raw, prefixLength: prefixLength, valueCount: valueCount)
        }
    }

    /// `key.withUnsafeBytes(body)`, keeping the error's type.
    private static func withBytes<T>(of key: [UInt8], _ body: (UnsafeRawBufferPointer) throws(SatchelError) -> T) throws(SatchelError) -> T {
        try key.withUnsafeBytes { raw in Result { () throws(SatchelError) in try body(raw) } }.get()
    }
}
