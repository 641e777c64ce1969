import Foundation

/// Streams the top-level items of a JSON file without loading it whole: the elements of one
/// JSON array, or a sequence of JSON values separated by whitespace (JSON lines).
///
/// An object or array item that lies whole in the buffer is parsed where it lies, by
/// ``JSONParser``, which finds its end as it goes. Any other item (one that runs past the buffer,
/// a malformed one, a scalar) is found by a scan that only tracks strings and brackets, with no
/// recursion, so any nesting depth is safe; it is parsed afterwards, and the parser reports the
/// precise error. Memory stays at about one chunk plus the largest item.
struct JSONItemReader {
    /// One item: its bytes and where it starts in the file.
    struct Item {
        var bytes: ArraySlice<UInt8>
        /// 1-based line of the item's first byte.
        var line: Int
        /// 1-based column (in bytes) of the item's first byte on its line.
        var column = 1
        /// 0-based position among the file's items.
        var index: Int
        /// Where its first byte lies in the file.
        var offset: Int = 0
        /// The item parsed, when the reader parsed it in place (nil: parse `bytes`).
        var value: JSONValue? = nil
        /// The item's shape, when the reader checked it in place without building it (a reader
        /// made with `building: false`).
        var shape: JSONParser.Shape? = nil
        /// Set when the item was parsed in place and its text is already its attributes' stored
        /// form, but for its `object` member.
        var storedForm: JSONParser.StoredForm? = nil

        /// The item's attributes (its id left out) as a write stores them, when its text already
        /// is that (Satchel's own export, for one): nil when they must be encoded.
        var storedJSON: [UInt8]? {
            guard let storedForm else { return nil }
            guard let cut = storedForm.idMember else { return Array(bytes) }
            var json: [UInt8] = []
            json.reserveCapacity(bytes.count - cut.count)
            json += bytes[bytes.startIndex..<(bytes.startIndex + cut.lowerBound)]
            json += bytes[(bytes.startIndex + cut.upperBound)...]
            return json
        }
    }

    enum Layout { case undecided, array, sequence }

    private let handle: FileHandle
    private let chunkSize: Int
    /// Whether items parsed in place are built (``Item/value``) or only checked (``Item/shape``).
    private let building: Bool
    private var buffer: [UInt8] = []
    private var pos = 0
    /// Where `buffer[0]` lies in the file.
    private var bufferBase = 0
    private var eof = false
    private(set) var line = 1
    /// Where the current line starts in the file.
    private var lineStart = 0
    private var itemCount = 0
    private(set) var layout = Layout.undecided
    /// In an array: whether a value or a separator comes next, and whether `]` was seen.
    private var expectValue = true
    private var arrayClosed = false
    /// Bytes consumed from the file so far (for progress).
    private(set) var bytesRead = 0

    /// How much of the file one read takes (1 MiB).
    static let defaultChunkSize = 1 << 20

    /// The longest item an import reads (32 MiB), and the most array elements and object
    /// members one item may hold (2,000,000): what bounds an import's memory whatever the file
    /// holds (one huge value, millions of tiny ones). The same limits as a server's answer
    /// (`AnswerLimits` of SatchelSync).
    static let maximumItemBytes = 32 << 20
    static let maximumItemValues = 2_000_000

    /// A reader of the regular file at `url`. Anything else (a pipe, a device) is refused before
    /// it is opened: an import reads its file twice, checking all of it before writing, and a
    /// stream may never end.
    init(url: URL, chunkSize: Int = defaultChunkSize, building: Bool = true) throws {
        if let type = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.type] as? FileAttributeType, type != .typeRegular {
            throw SatchelError(
                .invalidArgument,
                "\(url.path) is not a regular file: an import reads its file twice (checking all of it before writing anything); save the data to a file first"
            )
        }
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw SatchelError(.io, "cannot open \(url.path): \(error.localizedDescription)")
        }
        self.chunkSize = chunkSize
        self.building = building
    }

    /// A reader of the items from byte `offset` of the file at `url` on, in a file of `layout`
    /// (`.array`: `offset` is where an element starts, after `[` or a `,`). Its items' lines and
    /// indexes count from there.
    init(url: URL, resumingAt offset: Int, layout: Layout, chunkSize: Int = defaultChunkSize, building: Bool = true) throws {
        try self.init(url: url, chunkSize: chunkSize, building: building)
        do {
            try handle.seek(toOffset: UInt64(offset))
        } catch {
            throw SatchelError(.io, "cannot read \(url.path) from byte \(offset): \(error.localizedDescription)")
        }
        bufferBase = offset
        bytesRead = offset
        self.layout = layout
    }

    /// Reads more of the file into the buffer. Returns false at the end of the file.
    private mutating func fill() throws -> Bool {
        if eof { return false }
        let data: Data?
        do {
            data = try handle.read(upToCount: chunkSize)
        } catch {
            throw SatchelError(.io, "read failed: \(error.localizedDescription)")
        }
        guard let data, !data.isEmpty else {
            eof = true
            return false
        }
        bytesRead += data.count
        buffer.append(contentsOf: data)
        return true
    }

    private func failure(_ reason: String) -> SatchelError {
        SatchelError(.malformedJSON, "line \(line): \(reason)")
    }

    /// Skips whitespace, counting lines; returns the next byte or nil at the end of the file.
    private mutating func skipWhitespace() throws -> UInt8? {
        while true {
            while pos < buffer.count {
                switch buffer[pos] {
                case 0x0A:
                    line += 1
                    pos += 1
                    lineStart = bufferBase + pos
                case 0x20, 0x09, 0x0D: pos += 1
                default: return buffer[pos]
                }
            }
            if try !fill() { return nil }
        }
    }

    /// The next item, or nil after the last one.
    mutating func next() throws -> Item? {
        // Drop what was consumed once it reaches a chunk, so the buffer stays near two chunks
        // plus one item and each byte moves at most once.
        if pos >= chunkSize {
            buffer.removeSubrange(0..<pos)
            bufferBase += pos
            pos = 0
        }
        if layout == .undecided {
            // A UTF-8 byte order mark is tolerated at the very start. A read may return fewer
            // bytes than asked (a pipe), so read on until the mark's 3 bytes are in.
            _ = try skipWhitespace()
            while buffer.count - pos < 3, try fill() {}
            if buffer.count - pos >= 3 && buffer[pos] == 0xEF && buffer[pos + 1] == 0xBB && buffer[pos + 2] == 0xBF {
                pos += 3
                lineStart = bufferBase + pos  // columns count from after the mark
            }
            guard let first = try skipWhitespace() else {
                layout = .sequence
                return nil
            }
            if first == UInt8(ascii: "[") {
                layout = .array
                pos += 1
            } else {
                layout = .sequence
            }
        }
        guard let byte = try skipWhitespace() else {
            if layout == .array && !arrayClosed { throw failure("unterminated array: expected ']' before the end of the file") }
            return nil
        }
        if layout == .array {
            if arrayClosed { throw failure("unexpected data after the closing ']'") }
            if expectValue {
                if byte == UInt8(ascii: "]") {
                    if itemCount > 0 { throw failure("expected a value after ','") }
                    arrayClosed = true
                    pos += 1
                    return try next()
                }
                if byte == UInt8(ascii: ",") { throw failure("unexpected ','") }
            } else {
                switch byte {
                case UInt8(ascii: ","):
                    pos += 1
                    expectValue = true
                    return try next()
                case UInt8(ascii: "]"):
                    arrayClosed = true
                    pos += 1
                    return try next()
                default:
                    throw failure("expected ',' or ']' between array elements")
                }
            }
        }
        let start = pos
        let startLine = line
        let column = bufferBase + start - lineStart + 1
        expectValue = false
        defer { itemCount += 1 }
        if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "["), var item = readInPlace(from: start, line: startLine) {
            item.offset = bufferBase + start
            item.column = column
            return item
        }
        let end = try scanItem(from: start)
        pos = end
        var item = Item(bytes: buffer[start..<end], line: startLine, index: itemCount, offset: bufferBase + start)
        item.column = column
        return item
    }

    /// The object or array starting at `start`, parsed (or checked) in place, the lines it spans
    /// counted; nil when it does not parse within the buffer (it runs past it, or is malformed:
    /// the scan then finds its end, and the parse of its bytes says what is wrong).
    private mutating func readInPlace(from start: Int, line startLine: Int) -> Item? {
        typealias Found = (value: JSONValue?, shape: JSONParser.Shape?, storedForm: JSONParser.StoredForm?, count: Int, lines: Int)
        var afterNewline = 0
        let found = buffer.withUnsafeBufferPointer { all -> Found? in
            let rest = UnsafeBufferPointer(rebasing: all[start...])
            var item = Item(bytes: [], line: 0, index: 0)
            let count: Int
            do {
                if building {
                    (item.value, count, item.storedForm) = try JSONParser.parseItem(rest, maxValues: Self.maximumItemValues)
                } else {
                    (item.shape, count) = try JSONParser.checkPrefix(rest, maxValues: Self.maximumItemValues)
                }
            } catch {
                return nil
            }
            // Raw newlines lie only between an item's tokens (a string holds none).
            var lines = 0
            var p = UnsafeRawPointer(rest.baseAddress!)
            var left = count
            while left > 0, let newline = memchr(p, 0x0A, left) {
                lines += 1
                left -= UnsafeRawPointer(newline) - p + 1
                p = UnsafeRawPointer(newline) + 1
            }
            afterNewline = p - UnsafeRawPointer(rest.baseAddress!)
            return (item.value, item.shape, item.storedForm, count, lines)
        }
        guard let found else { return nil }
        pos = start + found.count
        line += found.lines
        if found.lines > 0 { lineStart = bufferBase + start + afterNewline }
        return Item(
            bytes: buffer[start..<pos], line: startLine, index: itemCount, value: found.value, shape: found.shape, storedForm: found.storedForm)
    }

    /// Finds the end of the item starting at `start`, reading more of the file as needed.
    private mutating func scanItem(from start: Int) throws -> Int {
        var i = start
        let first = buffer[start]
        var depth = 0
        var inString = false
        var escaped = false
        let isContainer = first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
        let isString = first == UInt8(ascii: "\"")
        while true {
            if i - start > Self.maximumItemBytes {
                throw SatchelError(
                    .malformedJSON,
                    "line \(line): an item longer than \(Self.maximumItemBytes) bytes (the most an import reads as one object): the file is refused")
            }
            while i < buffer.count {
                let c = buffer[i]
                if c == 0x0A && (isContainer || isString) {
                    line += 1
                    lineStart = bufferBase + i + 1
                }
                if inString {
                    if escaped {
                        escaped = false
                    } else if c == UInt8(ascii: "\\") {
                        escaped = true
                    } else if c == UInt8(ascii: "\"") {
                        inString = false
                        if isString { return i + 1 }
                    }
                } else if isContainer || isString {
                    switch c {
                    case UInt8(ascii: "\""): inString = true
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { return i + 1 }
                    default: break
                    }
                } else {
                    // A scalar ends at whitespace or a structural character.
                    switch c {
                    case 0x20, 0x0A, 0x0D, 0x09, UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"),
                        UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: "\""):
                        return i  // a newline ending it is counted when skipped
                    default: break
                    }
                }
                i += 1
            }
            // The item runs past the buffer: read more; at the end of the file hand over what
            // there is, and the parser will say what is missing.
            if try !fill() { return buffer.count }
        }
    }
}
