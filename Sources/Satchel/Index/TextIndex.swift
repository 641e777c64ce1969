import Foundation

/// The words of text, as a full-text index keeps them and a text query looks them up.
///
/// A word is a run of letters, digits and connecting marks (Unicode properties), or a single
/// character of a script written without spaces (Han, Hiragana, Katakana, Hangul, Thai…: each is
/// a word, so that a phrase of them finds any run; a Hangul syllable is one character). Words
/// are folded: decomposed (NFD), combining marks removed, lowercased, a final sigma read as
/// sigma — `Café`, `CAFE` and `café` are one word, and so are `ΟΔΟΣ` and `οδός`.
public enum TextTokens {
    /// The folded words of `text`, in order.
    public static func words(_ text: String) -> [String] {
        var words: [String] = []
        forEachWord(in: text) { words.append(String(decoding: $0, as: UTF8.self)) }
        return words
    }

    /// Calls `body` with the UTF-8 bytes of each folded word of `text`, in order. ASCII text is
    /// read byte by byte (nothing to decompose or to strip).
    static func forEachWord(in text: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        var text = text
        let ascii = text.withUTF8 { bytes -> Bool in
            guard !bytes.contains(where: { $0 >= 0x80 }) else { return false }
            withUnsafeTemporaryAllocation(byteCount: max(bytes.count, 1), alignment: 1) { word in
                var length = 0
                for byte in bytes {
                    let lower = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
                    if (lower >= 0x61 && lower <= 0x7A) || (byte >= 0x30 && byte <= 0x39) {
                        word[length] = lower
                        length += 1
                    } else if length > 0 {
                        body(UnsafeRawBufferPointer(rebasing: word[..<length]))
                        length = 0
                    }
                }
                if length > 0 { body(UnsafeRawBufferPointer(rebasing: word[..<length])) }
            }
            return true
        }
        if ascii { return }
        var current = String.UnicodeScalarView()
        func flush() {
            if current.isEmpty { return }
            var word = String(current)
            word.withUTF8 { body(UnsafeRawBufferPointer($0)) }
            current = String.UnicodeScalarView()
        }
        for scalar in fold(text).unicodeScalars {
            if isUnspaced(scalar) {
                flush()
                current.append(scalar)
                flush()
            } else if isWordScalar(scalar) {
                current.append(scalar)
            } else {
                flush()
            }
        }
        flush()
    }

    /// `text` decomposed, without combining marks, lowercased, a final sigma (`ς`) read as `σ`.
    /// Hangul syllables, which decomposing takes apart into their letters (jamo), are put back
    /// together: a syllable is the script's character, and the word.
    public static func fold(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        var hasJamo = false
        for scalar in text.decomposedStringWithCanonicalMapping.unicodeScalars where !isMark(scalar) {
            if (0x1100...0x11FF).contains(scalar.value) { hasJamo = true }
            scalars.append(scalar)
        }
        var folded = String(scalars)
        if hasJamo { folded = folded.precomposedStringWithCanonicalMapping }
        folded = folded.lowercased()
        return folded.unicodeScalars.contains("\u{3C2}") ? folded.replacingOccurrences(of: "\u{3C2}", with: "\u{3C3}") : folded
    }

    static func isMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark: true
        default: false
        }
    }

    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter, .decimalNumber, .letterNumber,
            .otherNumber, .spacingMark:
            true
        default: false
        }
    }

    /// Scripts written without spaces between words: each character is a word.
    static func isUnspaced(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0E00...0x0EFF,  // Thai, Lao
            0x1000...0x109F,  // Myanmar
            0x1780...0x17FF,  // Khmer
            0x3040...0x30FF,  // Hiragana, Katakana
            0x3400...0x4DBF, 0x4E00...0x9FFF, 0xF900...0xFAFF, 0x20000...0x2FFFF,  // Han
            0xAC00...0xD7AF, 0x1100...0x11FF:  // Hangul
            true
        default: false
        }
    }
}

/// A full-text query: words (each must appear), `"phrases"` (the words in a row) and `prefix*`
/// (a word starting so), all of which must match. ``Model/search(_:where:order:limit:select:)``
/// reads its text so; an app (or a command line) that wants to check a query as it is typed,
/// before any store is read, parses it with ``init(parsing:)``.
public struct TextQuery: Sendable {
    enum Part: Hashable {
        case word(String)
        case prefix(String)
        case phrase([String])
    }

    let parts: [Part]

    /// Parses `text`.
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a query without a word or with an
    ///   unclosed quote, saying so in one line.
    public init(parsing text: String) throws(SatchelError) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let quote = rest.firstIndex(of: "\"") {
            parts += Self.plain(rest[..<quote])
            let after = rest.index(after: quote)
            guard let close = rest[after...].firstIndex(of: "\"") else {
                throw SatchelError(.invalidArgument, "the text query '\(text)' opens a phrase (\") it never closes")
            }
            let words = TextTokens.words(String(rest[after..<close]))
            if words.count == 1 { parts.append(.word(words[0])) } else if !words.isEmpty { parts.append(.phrase(words)) }
            rest = rest[rest.index(after: close)...]
        }
        parts += Self.plain(rest)
        var seen = Set<Part>()
        self.parts = parts.filter { seen.insert($0).inserted }
        guard !self.parts.isEmpty else {
            throw SatchelError(.invalidArgument, "the text query '\(text)' has no word to look for")
        }
    }

    /// Words outside quotes: `pref*` is a prefix (of its folded first word).
    private static func plain(_ text: Substring) -> [Part] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).flatMap { piece -> [Part] in
            let words = TextTokens.words(String(piece))
            guard piece.hasSuffix("*"), let last = words.last else { return words.map(Part.word) }
            return words.dropLast().map(Part.word) + [.prefix(last)]
        }
    }
}

/// One object found by ``Model/search(_:where:order:limit:select:)`` and how well it matches.
public struct TextMatch: Sendable {
    public var object: Object
    /// Its BM25 score (k1 = 1.2, b = 0.75): higher is better.
    public var score: Double
}

extension StoredIndex {
    /// An object's text in this index: its length in words and each distinct folded word's
    /// positions (in words from 0, with a gap between texts so that a phrase never runs from one
    /// into the next); nil for an object without text there.
    func textPostings(_ attributes: JSONObject) -> (length: Int, words: [String: [Int]])? {
        var words: [String: [Int]] = [:]
        let length = forEachTextWord(in: attributes) { word, position in
            words[String(decoding: word, as: UTF8.self), default: []].append(position)
        }
        return words.isEmpty ? nil : (length, words)
    }

    /// Calls `body` with the UTF-8 bytes of each word of the object's text in this index and
    /// its position, in order, and returns the number of words: positions count from 0, and a
    /// gap between texts keeps a phrase from running from one into the next.
    @discardableResult
    func forEachTextWord(in attributes: JSONObject, _ body: (UnsafeRawBufferPointer, Int) -> Void) -> Int {
        var next = 0
        var count = 0
        for field in definition.fields {
            var texts: [String] = []
            switch field.value(in: attributes) {
            case .string(let text)?: texts = [text]
            case .array(let elements)?: texts = elements.compactMap(\.stringValue)
            default: break
            }
            for text in texts {
                let gap = next > 0 ? 1 : 0  // the first word is at 0 (``textCounts(in:)`` counts on it)
                var first = true
                TextTokens.forEachWord(in: text) { word in
                    if first {
                        next += gap
                        first = false
                    }
                    body(word, next)
                    next += 1
                    count += 1
                }
            }
        }
        return count
    }

    /// `(idx, model, indexId, word)`: the prefix of every posting block of `word`.
    func textWordPrefix(_ word: String) -> [UInt8] { Keys.element(after: prefix, .string(word)) }

    /// `(idx, model, indexId, word, firstId)`: the key of the posting block of `word` that starts
    /// with object `firstID` (``TextBlock`` is its value).
    func textBlockKey(_ word: String, firstID: String) -> [UInt8] {
        Keys.indexValueEntry(prefix, values: [.string(word)], objectID: firstID)
    }

    /// Positions `iterator` past the posting block of `word` whose objects' range holds `id`
    /// (the last block starting at or before it, or the word's first when `id` precedes them
    /// all), and returns its key, its value and the next block's first id (nil for the word's
    /// last block); nil when the word has no block.
    func textBlock(_ word: String, holding id: String, iterator: LevelDBIterator) throws -> (key: [UInt8], value: [UInt8], next: String?)? {
        let wordPrefix = textWordPrefix(word)
        let target = textBlockKey(word, firstID: id)
        iterator.seek(target)
        var found = iterator.isValid && iterator.withKey { $0.elementsEqual(target) }
        if !found {
            if iterator.isValid { iterator.previous() } else { iterator.seekToLast() }
            found = iterator.isValid && iterator.keyHasPrefix(wordPrefix)
            if !found {
                iterator.seek(target)
                found = iterator.isValid && iterator.keyHasPrefix(wordPrefix)
            }
        }
        try iterator.checkError()
        guard found else { return nil }
        let (key, value) = (iterator.key, iterator.value)
        iterator.next()
        var next: String?
        if iterator.isValid && iterator.keyHasPrefix(wordPrefix) {
            next = try iterator.withKey { raw in
                var decoder = KeyDecoder(raw, from: wordPrefix.count)
                return try decoder.readString()
            }
        }
        try iterator.checkError()
        return (key, value, next)
    }

    /// The posting of `word` for object `id` as the store holds it, or nil.
    func storedTextPosting(_ word: String, id: String, iterator: LevelDBIterator) throws -> TextPosting? {
        guard let block = try textBlock(word, holding: id, iterator: iterator) else { return nil }
        return try block.value.withUnsafeBytes { try TextBlock.decode($0) }.first { $0.id.elementsEqual(id.utf8) }?.posting
    }

    /// A text index's entries (a posting per word and object) and totals, counted from its
    /// blocks: an object's posting holding position 0 counts it and its length once.
    func textCounts(in db: LevelDB) throws -> (entries: Int, totals: StoredStatistics.TextTotals) {
        var totals = StoredStatistics.TextTotals()
        var entries = 0
        let iterator = try db.makeIterator(fillCache: false)
        iterator.seek(prefix)
        while iterator.isValid && iterator.keyHasPrefix(prefix) {
            try iterator.withValue { block in
                try TextBlock.scan(block) { (_, length, _, positions) in
                    entries += 1
                    if positions.first == 0 {
                        totals.objects += 1
                        totals.words += length
                    }
                }
            }
            iterator.next()
        }
        try iterator.checkError()
        return (entries, totals)
    }
}

extension Model {
    /// The objects whose text (in the model's first ready text index) matches `text`, best
    /// first by BM25, ties by id (or in `order`, when given); `condition` filters them too, and
    /// `select` keeps only those attributes of each (as a query's projection does).
    ///
    /// `text` holds words (each must appear), `"phrases"` (the words in a row) and `prefix*`
    /// (a word beginning so); words are folded (case and diacritics) as the index folds them.
    ///
    /// ```swift
    /// try notes.createIndex(.text("title", "body"))
    /// let hits = try notes.search(#"lamp "reading light" brass*"#, where: "archived" == false, limit: 20)
    /// ```
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a query without a word or with an
    ///   unclosed quote; `.unindexedQuery` when the model has no ready text index.
    public func search(
        _ text: String, where condition: Condition = .all, order: [SortKey] = [], limit: Int? = nil, select: [Field]? = nil
    ) throws -> [TextMatch] {
        let query = try TextQuery(parsing: text)
        let entry = try store.entry(name)
        try condition.refuseArrayCrossings(entry.statistics, model: name)
        guard let index = entry.indexes.first(where: { $0.state == .ready && $0.definition.kind == .text }) else {
            throw Self.noTextIndex(entry, model: name)
        }
        let db = try store.database(entry.definition.partition)
        let snapshot = try db.makeSnapshot()
        let iterator = try db.makeIterator(snapshot: snapshot, fillCache: true)

        /// The postings of every word whose blocks are under `prefix`, one list per word.
        func postings(under prefix: [UInt8], positions: Bool) throws -> [PostingList] {
            var lists: [PostingList] = []
            var word: [UInt8] = []
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                // The word is the key between the index prefix and the block's first id.
                let blockWord = try iterator.withKey { raw -> ArraySlice<UInt8> in
                    var decoder = KeyDecoder(raw, from: index.prefix.count)
                    try decoder.skipValue()
                    return ArraySlice(UnsafeRawBufferPointer(rebasing: raw[index.prefix.count..<decoder.position]))
                }
                if lists.isEmpty || !blockWord.elementsEqual(word) {
                    lists.append(PostingList())
                    word = Array(blockWord)
                }
                try iterator.withValue { try lists[lists.count - 1].append(block: $0, positions: positions) }
                iterator.next()
            }
            try iterator.checkError()
            return lists
        }

        // Each part's postings: the objects it matches, how often, and their lengths.
        var parts: [PostingList] = []
        for part in query.parts {
            switch part {
            case .word(let word):
                parts.append(try postings(under: index.textWordPrefix(word), positions: false).first ?? PostingList())
            case .prefix(let start):
                parts.append(PostingList.union(try postings(under: Keys.stringPrefix(after: index.prefix, start), positions: false)))
            case .phrase(let words):
                parts.append(
                    PostingList.phrase(try words.map { try postings(under: index.textWordPrefix($0), positions: true).first ?? PostingList() }))
            }
        }

        // The objects every part matches, scored by BM25 (k1 = 1.2, b = 0.75) from the postings
        // alone: the model's statistics give the objects' count and mean length.
        let totals = entry.statistics.textTotals[index.id] ?? StoredStatistics.TextTotals()
        let count = Double(totals.objects)
        let meanLength = totals.objects > 0 ? Double(totals.words) / count : 0
        let weights = parts.map { log(1 + (count - Double($0.count) + 0.5) / (Double($0.count) + 0.5)) }
        let driver = parts.indices.min { parts[$0].count < parts[$1].count }!
        var cursors = [Int](repeating: 0, count: parts.count)
        var matched: [Int] = []  // postings of the driver
        var scores: [Double] = []
        parts[driver].idBytes.withUnsafeBytes { driverIDs in
            for i in 0..<parts[driver].count {
                let id = UnsafeRawBufferPointer(rebasing: driverIDs[parts[driver].idRange(i)])
                var score = 0.0
                let norm = 1.2 * (0.25 + 0.75 * (meanLength > 0 ? Double(parts[driver].lengths[i]) / meanLength : 1))
                var all = true
                for p in parts.indices {
                    let at: Int
                    if p == driver {
                        at = i
                    } else {
                        guard let found = parts[p].seek(id, from: &cursors[p]) else {
                            all = false
                            break
                        }
                        at = found
                    }
                    let frequency = Double(parts[p].frequencies[at])
                    score += weights[p] * frequency * 2.2 / (frequency + norm)
                }
                if all {
                    matched.append(i)
                    scores.append(score)
                }
            }
        }

        // The objects, read from the same moment in rank order (best score, then id) until the
        // limit is met; all of them for another order.
        let ranked = parts[driver]
        var heap = RankHeap(count: matched.count) { a, b in
            if scores[a] != scores[b] { return scores[a] > scores[b] }
            return ranked.idBytes.withUnsafeBytes { ids in
                UTF8Order.compareBytes(
                    UnsafeRawBufferPointer(rebasing: ids[ranked.idRange(matched[a])]),
                    UnsafeRawBufferPointer(rebasing: ids[ranked.idRange(matched[b])]))
                    < 0
            }
        }
        var matches: [TextMatch] = []
        let dottedFields = Condition.deepDottedFields(condition.node)
        while let next = heap.pop() {
            if order.isEmpty, let limit, matches.count >= limit { break }
            let id = ranked.idBytes.withUnsafeBytes {
                String(decoding: UnsafeRawBufferPointer(rebasing: $0[ranked.idRange(matched[next])]), as: UTF8.self)
            }
            let found = try db.withValue(forKey: Keys.object(prefix: objectPrefix, id), snapshot: snapshot) { bytes in
                try bytes.map { Object(id: id, storedAttributes: try StoredObject.decode($0, model: name, id: id)) }
            }
            guard let found else { continue }
            if !dottedFields.isEmpty { try Condition.refuseArrays(on: dottedFields, in: found, model: name) }
            guard condition.matches(found) else { continue }
            matches.append(TextMatch(object: found, score: scores[next]))
        }
        if !order.isEmpty {
            // By the ids' bytes: two ids that are canonically equivalent are two objects.
            let scores = Dictionary(matches.map { (Array($0.object.id.utf8), $0.score) }, uniquingKeysWith: { first, _ in first })
            matches = order.sorted(matches.map(\.object)).map { TextMatch(object: $0, score: scores[Array($0.id.utf8)] ?? 0) }
            if let limit { matches = Array(matches.prefix(limit)) }
        }
        guard let select else { return matches }
        let projection = ProjectionTree(select)
        return matches.map { TextMatch(object: projection.project($0.object), score: $0.score) }
    }

    /// Why the model has no text index to search: none, or one whose build did not finish (a
    /// black-box probe: an interrupted build was said to be none, and declaring another was refused).
    static func noTextIndex(_ entry: ModelEntry, model name: String) -> SatchelError {
        if let unfinished = entry.indexes.first(where: { $0.state == .building && $0.definition.kind == .text }) {
            let fields = unfinished.definition.fields.map(\.description).joined(separator: ",")
            return SatchelError(
                .unindexedQuery,
                "model '\(name)''s text index \(unfinished.definition) was not finished (its build stopped): declare it again to finish it (satchel index \(name) --text \(fields))",
                model: name)
        }
        return SatchelError(
            .unindexedQuery, "model '\(name)' has no text index to search: create one (satchel index \(name) --text ATTR[,ATTR…])", model: name)
    }

    /// How ``search(_:where:order:limit:select:)`` would run, in words: the index and the
    /// query's parts, then the filter `condition` and the `order`, when given, as
    /// ``explain(_:)`` says them.
    public func explainSearch(_ text: String, where condition: Condition = .all, order: [SortKey] = []) throws -> String {
        let query = try TextQuery(parsing: text)
        let entry = try store.entry(name)
        guard let index = entry.indexes.first(where: { $0.state == .ready && $0.definition.kind == .text }) else {
            throw Self.noTextIndex(entry, model: name)
        }
        let parts = query.parts.map { part in
            switch part {
            case .word(let word): word
            case .prefix(let start): start + "*"
            case .phrase(let words): "\"" + words.joined(separator: " ") + "\""
            }
        }
        var explained = ["text index \(index.definition): \(parts.joined(separator: " AND ")), ranked by BM25"]
        if case .always = condition.node {} else { explained.append("filter \(Condition.describe(condition.node))") }
        if !order.isEmpty { explained.append("sort by \(order.map(\.description).joined(separator: ", ")) instead of the rank") }
        return explained.joined(separator: "; ")
    }
}

/// One query part's postings, decoded from its blocks: object ids in the order of their bytes,
/// each with the part's frequency in the object and the object's length in words (and, read for
/// a phrase, the word's positions).
struct PostingList {
    /// The ids' bytes end to end; id `i` ends at `idEnds[i]`.
    private(set) var idBytes: [UInt8] = []
    private(set) var idEnds: [Int] = []
    private(set) var frequencies: [Int] = []
    private(set) var lengths: [Int] = []
    private(set) var positions: [[Int]] = []

    var count: Int { idEnds.count }

    func idRange(_ i: Int) -> Range<Int> { (i == 0 ? 0 : idEnds[i - 1])..<idEnds[i] }

    /// Appends a block's postings (which follow those already here).
    mutating func append(block: UnsafeRawBufferPointer, positions withPositions: Bool) throws(SatchelError) {
        try TextBlock.scan(block) { (id, length, frequency, positions) throws(SatchelError) in
            idBytes.append(contentsOf: id)
            idEnds.append(idBytes.count)
            frequencies.append(frequency)
            lengths.append(length)
            if withPositions { self.positions.append(try TextBlock.positions(positions, count: frequency)) }
        }
    }

    private mutating func append(from list: PostingList, _ i: Int, frequency: Int) {
        list.idBytes.withUnsafeBytes { idBytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[list.idRange(i)])) }
        idEnds.append(idBytes.count)
        frequencies.append(frequency)
        lengths.append(list.lengths[i])
    }

    /// The index of `id` here, looked for from `cursor` on (which it advances: ids asked for
    /// ascend), or nil.
    func seek(_ id: UnsafeRawBufferPointer, from cursor: inout Int) -> Int? {
        idBytes.withUnsafeBytes { ids in
            while cursor < count {
                let order = UTF8Order.compareBytes(UnsafeRawBufferPointer(rebasing: ids[idRange(cursor)]), id)
                if order == 0 { return cursor }
                if order > 0 { return nil }
                cursor += 1
            }
            return nil
        }
    }

    /// The objects any of `lists` holds, with their frequencies summed (a prefix's words).
    static func union(_ lists: [PostingList]) -> PostingList {
        var lists = lists
        while lists.count > 1 {
            var merged: [PostingList] = []
            for pair in stride(from: 0, to: lists.count, by: 2) {
                merged.append(pair + 1 < lists.count ? union(lists[pair], lists[pair + 1]) : lists[pair])
            }
            lists = merged
        }
        return lists.first ?? PostingList()
    }

    private static func union(_ a: PostingList, _ b: PostingList) -> PostingList {
        var result = PostingList()
        var (i, j) = (0, 0)
        a.idBytes.withUnsafeBytes { aIDs in
            b.idBytes.withUnsafeBytes { bIDs in
                while i < a.count || j < b.count {
                    let order =
                        i == a.count
                        ? 1
                        : j == b.count
                            ? -1
                            : UTF8Order.compareBytes(
                                UnsafeRawBufferPointer(rebasing: aIDs[a.idRange(i)]), UnsafeRawBufferPointer(rebasing: bIDs[b.idRange(j)]))
                    if order < 0 {
                        result.append(from: a, i, frequency: a.frequencies[i])
                        i += 1
                    } else if order > 0 {
                        result.append(from: b, j, frequency: b.frequencies[j])
                        j += 1
                    } else {
                        result.append(from: a, i, frequency: a.frequencies[i] + b.frequencies[j])
                        i += 1
                        j += 1
                    }
                }
            }
        }
        return result
    }

    /// The objects holding `words` (each read with positions) in a row, with the number of
    /// runs as the frequency.
    static func phrase(_ words: [PostingList]) -> PostingList {
        var result = PostingList()
        guard let first = words.first else { return result }
        var cursors = [Int](repeating: 0, count: words.count)
        first.idBytes.withUnsafeBytes { ids in
            for i in 0..<first.count {
                let id = UnsafeRawBufferPointer(rebasing: ids[first.idRange(i)])
                var rest: [Set<Int>] = []
                for w in words.indices.dropFirst() {
                    guard let at = words[w].seek(id, from: &cursors[w]) else { break }
                    rest.append(Set(words[w].positions[at]))
                }
                guard rest.count == words.count - 1 else { continue }
                let runs = first.positions[i].filter { start in rest.enumerated().allSatisfy { $1.contains(start + $0 + 1) } }.count
                if runs > 0 { result.append(from: first, i, frequency: runs) }
            }
        }
        return result
    }
}

/// The matches of a search in rank order, taken one at a time: a binary heap, built in linear
/// time, so that a limit of 20 orders 20 matches, not all of them.
private struct RankHeap {
    private var items: [Int]
    private let before: (Int, Int) -> Bool

    init(count: Int, before: @escaping (Int, Int) -> Bool) {
        self.items = Array(0..<count)
        self.before = before
        for i in stride(from: count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    mutating func pop() -> Int? {
        guard let top = items.first else { return nil }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        if !items.isEmpty { siftDown(0) }
        return top
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let (left, right) = (2 * i + 1, 2 * i + 2)
            var best = i
            if left < items.count && before(items[left], items[best]) { best = left }
            if right < items.count && before(items[right], items[best]) { best = right }
            if best == i { return }
            items.swapAt(i, best)
            i = best
        }
    }
}
