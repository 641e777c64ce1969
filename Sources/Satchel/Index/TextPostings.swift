/// One object's occurrences of one word in a text index: the object's length in words (which
/// BM25 needs, carried here so that ranking reads no object) and the word's positions in it.
struct TextPosting: Equatable {
    var length: Int
    var positions: [Int]
}

/// The value of a text index's posting block, `(idx, model, indexId, word, firstId)`: the
/// postings of one word for a run of objects, in the order of their ids' UTF-8 bytes. This file
/// owns the layout (docs/KEY_LAYOUT.md, "Text postings"):
///
/// ```
/// count                                  varint
/// per posting:
///   shared, suffixLength, suffix         the id: bytes shared with the previous id, then the rest
///   length                               varint, the object's words
///   frequency                            varint, the number of positions
///   positionBytes, positions             varint, then the positions as varints, each after the
///                                        first the gap from the one before
/// ```
///
/// Varints are LEB128 (seven bits a byte, low first). A block holds at most ``capacity``
/// postings; a word's blocks cover its objects in order, each from its first id to the next
/// block's.
enum TextBlock {
    /// The most postings a block holds: small enough that writing one object rewrites little,
    /// large enough that a query reads few keys.
    static let capacity = 128

    /// The block holding `postings` (sorted by id, not empty).
    static func encode(_ postings: ArraySlice<(id: [UInt8], posting: TextPosting)>) -> [UInt8] {
        var writer = Writer()
        for (id, posting) in postings { writer.append(id: id, length: posting.length, positions: posting.positions) }
        return writer.bytes
    }

    /// Builds a block posting by posting (in the order of their ids).
    struct Writer {
        private(set) var count = 0
        private var body: [UInt8] = []
        private var previous: [UInt8] = []
        /// The first posting's id.
        private(set) var firstID: [UInt8] = []

        var isFull: Bool { count >= TextBlock.capacity }

        mutating func append(id: [UInt8], length: Int, positions: some Collection<Int>) {
            id.withUnsafeBytes { append(id: $0, length: length, positions: positions) }
        }

        mutating func append(id: UnsafeRawBufferPointer, length: Int, positions: some Collection<Int>) {
            if count == 0 {
                body.reserveCapacity(TextBlock.capacity * 12)
                firstID = Array(id)
            }
            var shared = 0
            while shared < previous.count && shared < id.count && previous[shared] == id[shared] { shared += 1 }
            appendVarint(shared, to: &body)
            appendVarint(id.count - shared, to: &body)
            body.append(contentsOf: UnsafeRawBufferPointer(rebasing: id[shared...]))
            appendVarint(length, to: &body)
            // The positions' size first, then the positions themselves, written in place.
            var size = 0
            var last = 0
            for position in positions {
                size += varintSize(position - last)
                last = position
            }
            appendVarint(positions.count, to: &body)
            appendVarint(size, to: &body)
            last = 0
            for position in positions {
                appendVarint(position - last, to: &body)
                last = position
            }
            previous.removeAll(keepingCapacity: true)
            previous.append(contentsOf: id)
            count += 1
        }

        /// The block: the count, then the postings.
        var bytes: [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(body.count + 3)
            appendVarint(count, to: &bytes)
            bytes.append(contentsOf: body)
            return bytes
        }
    }

    /// Every posting of `bytes`, in order.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws(SatchelError) -> [(id: [UInt8], posting: TextPosting)] {
        var postings: [(id: [UInt8], posting: TextPosting)] = []
        try scan(bytes) { (id, length, frequency, positions) throws(SatchelError) in
            postings.append((Array(id), TextPosting(length: length, positions: try Self.positions(positions, count: frequency))))
        }
        return postings
    }

    /// The number of postings `bytes` holds.
    static func count(_ bytes: UnsafeRawBufferPointer) throws(SatchelError) -> Int {
        var reader = Reader(bytes)
        return try reader.varint()
    }

    /// Visits every posting of `bytes` in order: its id, the object's length, the word's
    /// frequency and its encoded positions (for ``positions(_:count:)``), without copying.
    static func scan(
        _ bytes: UnsafeRawBufferPointer,
        _ body: (_ id: UnsafeRawBufferPointer, _ length: Int, _ frequency: Int, _ positions: UnsafeRawBufferPointer) throws(SatchelError) -> Void
    ) throws(SatchelError) {
        var reader = Reader(bytes)
        let count = try reader.varint()
        // The id is rebuilt in place: the shared part stays, the suffix is copied after it.
        var id = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { id.deallocate() }
        var idLength = 0
        for _ in 0..<count {
            let shared = try reader.varint()
            let suffix = try reader.bytes(try reader.varint())
            guard shared <= idLength else { throw corrupt() }
            if shared + suffix.count > id.count {
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * (shared + suffix.count), alignment: 1)
                larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: id[..<shared]))
                id.deallocate()
                id = larger
            }
            if !suffix.isEmpty { id.baseAddress!.advanced(by: shared).copyMemory(from: suffix.baseAddress!, byteCount: suffix.count) }
            idLength = shared + suffix.count
            let length = try reader.varint()
            let frequency = try reader.varint()
            let positions = try reader.bytes(try reader.varint())
            guard frequency > 0 else { throw corrupt() }
            try body(UnsafeRawBufferPointer(rebasing: id[..<idLength]), length, frequency, positions)
        }
        guard reader.isAtEnd else { throw corrupt() }
    }

    /// The `count` positions encoded in `bytes`.
    static func positions(_ bytes: UnsafeRawBufferPointer, count: Int) throws(SatchelError) -> [Int] {
        guard count <= bytes.count else { throw corrupt() }  // each position takes a byte at least
        var reader = Reader(bytes)
        var positions: [Int] = []
        positions.reserveCapacity(count)
        var last = 0
        for _ in 0..<count {
            last += try reader.varint()
            positions.append(last)
        }
        guard reader.isAtEnd else { throw corrupt() }
        return positions
    }

    static func corrupt() -> SatchelError { SatchelError(.corruption, "a malformed posting block of a text index") }

    private static func varintSize(_ value: Int) -> Int {
        var size = 1
        var value = UInt(value)
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }

    @inline(__always)
    private static func appendVarint(_ value: Int, to bytes: inout [UInt8]) {
        var value = UInt(value)
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// Reads varints and byte runs from a block, refusing to read past its end.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var isAtEnd: Bool { offset == bytes.count }

        mutating func varint() throws(SatchelError) -> Int {
            var value = 0
            var shift = 0
            while offset < bytes.count {
                let byte = bytes[offset]
                offset += 1
                value |= Int(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
                guard shift < 63 else { break }
            }
            throw TextBlock.corrupt()
        }

        mutating func bytes(_ count: Int) throws(SatchelError) -> UnsafeRawBufferPointer {
            guard count <= bytes.count - offset else { throw TextBlock.corrupt() }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        }
    }
}
