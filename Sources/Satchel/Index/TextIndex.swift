import Foundation

/// The words of text, as a full-text index keeps them and a text query looks them up.
///
/// A word is a run of letters, digits and connecting marks (Unicode properties), or a single
/// character of a script written without spaces (Han, Hiragana, Katakana, Hangul, Thai…: each is
/// a word, so that a phrase of them finds any run). Words are folded: decomposed (NFD),
/// combining marks removed, lowercased — `Café`, `CAFE` and `café` are one word.
public enum TextTokens {
    /// The folded words of `text`, in order.
    public static func words(_ text: String) -> [String] {
        if let ascii = asciiWords(text) { return ascii }
        var words: [String] = []
        var current = String.UnicodeScalarView()
        func flush() {
            if !current.isEmpty { words.append(String(current)) }
            current = String.UnicodeScalarView()
        }
        for scalar in fold(text).unicodeScalars {
            if isUnspaced(scalar) {
                flush()
                words.append(String(scalar))
            } else if isWordScalar(scalar) {
                current.append(scalar)
            } else {
                flush()
            }
        }
        flush()
        return words
    }

    /// The words of ASCII text, read byte by byte (nothing to decompose or to strip); nil for
    /// text with any other character.
    static func asciiWords(_ text: String) -> [String]? {
        var text = text
        return text.withUTF8 { bytes -> [String]? in
            var words: [String] = []
            var start = -1
            var word: [UInt8] = []
            for (i, byte) in bytes.enumerated() {
                guard byte < 0x80 else { return nil }
                let lower = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
                if (lower >= 0x61 && lower <= 0x7A) || (byte >= 0x30 && byte <= 0x39) {
                    if start < 0 { start = i }
                    word.append(lower)
                } else if start >= 0 {
                    words.append(String(decoding: word, as: UTF8.self))
                    word.removeAll(keepingCapacity: true)
                    start = -1
                }
            }
            if start >= 0 { words.append(String(decoding: word, as: UTF8.self)) }
            return words
        }
    }

    /// `text` decomposed, without combining marks, lowercased.
    public static func fold(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.decomposedStringWithCanonicalMapping.unicodeScalars where !isMark(scalar) { scalars.append(scalar) }
        return String(scalars).lowercased()
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
/// (a word starting so), all of which must match.
struct TextQuery {
    enum Part: Hashable {
        case word(String)
        case prefix(String)
        case phrase([String])
    }

    let parts: [Part]

    init(parsing text: String) throws(SatchelError) {
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
    /// A text index's entries for `attributes`: one per distinct word, `(idx, model, indexId,
    /// word, [length, positions…], objectId)` (the object's length in words rides in each, so
    /// that ranking reads no object), and the length alone, `(…, false, length, objectId)`;
    /// none for an object without text there.
    func textEntries(objectID: String, attributes: JSONObject) -> [[UInt8]] {
        var positions: [String: [JSONValue]] = [:]
        var next: Int64 = 0
        for field in definition.fields {
            var texts: [String] = []
            switch field.value(in: attributes) {
            case .string(let text)?: texts = [text]
            case .array(let elements)?: texts = elements.compactMap(\.stringValue)
            default: break
            }
            for text in texts {
                for word in TextTokens.words(text) {
                    positions[word, default: []].append(.int(next))
                    next += 1
                }
                next += 1  // a phrase does not run from one text into the next
            }
        }
        guard !positions.isEmpty else { return [] }
        let length = Int64(positions.values.reduce(0) { $0 + $1.count })
        var keys = [Keys.indexValueEntry(prefix, values: [.bool(false), .int(length)], objectID: objectID)]
        for (word, list) in positions {
            keys.append(Keys.indexValueEntry(prefix, values: [.string(word), .array([.int(length)] + list)], objectID: objectID))
        }
        return keys
    }
}

extension StoredIndex {
    /// The length in words an object's text entries record (their first, the length entry), or
    /// nil when there are none.
    func textLength(of entries: [[UInt8]]) -> Int? {
        guard let first = entries.first else { return nil }
        return first.withUnsafeBytes { raw -> Int? in
            var decoder = KeyDecoder(raw, from: prefix.count)
            guard (try? decoder.skipValue()) != nil, case .int(let length)? = try? decoder.readValue() else { return nil }
            return Int(length)
        }
    }

    /// A text index's totals, counted from its length entries.
    func textTotals(in db: LevelDB) throws -> StoredStatistics.TextTotals {
        var totals = StoredStatistics.TextTotals()
        let iterator = try db.makeIterator(fillCache: false)
        let lengths = Keys.element(after: prefix, .bool(false))
        iterator.seek(lengths)
        while iterator.isValid && iterator.keyHasPrefix(lengths) {
            totals.objects += 1
            totals.words += textLength(of: [iterator.key]) ?? 0
            iterator.next()
        }
        try iterator.checkError()
        return totals
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
        guard let index = entry.indexes.first(where: { $0.state == .ready && $0.definition.kind == .text }) else {
            throw SatchelError(
                .unindexedQuery, "model '\(name)' has no text index to search: create one (satchel index \(name) --text ATTR[,ATTR…])", model: name)
        }
        let db = store.database(entry.definition.partition)
        let snapshot = try db.makeSnapshot()
        let iterator = try db.makeIterator(snapshot: snapshot, fillCache: true)

        /// Every entry under `prefix`: its value after `skipping` values past the index prefix,
        /// and its object id; decoded in place.
        func entries(under prefix: [UInt8], skipping: Int, _ body: (JSONValue, String) throws -> Void) throws {
            iterator.seek(prefix)
            while iterator.isValid && iterator.keyHasPrefix(prefix) {
                let (value, id) = try iterator.withKey { raw -> (JSONValue, String) in
                    var decoder = KeyDecoder(raw, from: index.prefix.count)
                    for _ in 0..<skipping { try decoder.skipValue() }
                    let value = try decoder.readValue()
                    let id = try decoder.readString()
                    guard decoder.isAtEnd else { throw SatchelError(.corruption, "a malformed entry of text index \(index.definition)") }
                    return (value, id)
                }
                try body(value, id)
                iterator.next()
            }
            try iterator.checkError()
        }

        // How many objects have text, and their mean length in words (the model's statistics).
        let totals = entry.statistics.textTotals[index.id] ?? StoredStatistics.TextTotals()
        let count = Double(totals.objects)
        let meanLength = totals.objects > 0 ? Double(totals.words) / count : 0

        // Each part's occurrences per object, and the object's length (which every posting carries).
        var lengths: [String: Int64] = [:]
        func postings(_ word: String) throws -> [String: ArraySlice<JSONValue>] {
            var found: [String: ArraySlice<JSONValue>] = [:]
            try entries(under: Keys.element(after: index.prefix, .string(word)), skipping: 1) { value, id in
                let list = value.arrayValue ?? []
                lengths[id] = list.first?.intValue ?? 0
                found[id] = list.dropFirst()
            }
            return found
        }
        var partHits: [[String: Int]] = []
        var partLengths: [String: Int64] = [:]
        for part in query.parts {
            var hits: [String: Int] = [:]
            switch part {
            case .word(let word):
                // Counts only: a word's positions matter to phrases alone.
                try entries(under: Keys.element(after: index.prefix, .string(word)), skipping: 1) { value, id in
                    guard case .array(let list) = value, let length = list.first?.intValue else { return }
                    hits[id] = list.count - 1
                    if partHits.isEmpty { partLengths[id] = length }
                }
            case .prefix(let start):
                try entries(under: Keys.stringPrefix(after: index.prefix, start), skipping: 1) { value, id in
                    guard case .array(let list) = value, let length = list.first?.intValue else { return }
                    hits[id, default: 0] += list.count - 1
                    if partHits.isEmpty { partLengths[id] = length }
                }
            case .phrase(let words):
                let lists = try words.map(postings)
                for (id, first) in lists[0] {
                    let rest = lists.dropFirst().map { $0[id].map { Set($0.compactMap(\.intValue)) } }
                    guard !rest.contains(where: { $0 == nil }) else { continue }
                    let runs = first.compactMap(\.intValue).filter { start in rest.enumerated().allSatisfy { $1!.contains(start + Int64($0) + 1) } }
                        .count
                    if runs > 0 { hits[id] = runs }
                }
                if partHits.isEmpty { partLengths = lengths }
            }
            partHits.append(hits)
        }

        // Objects matching every part, scored from the postings alone.
        let weights = partHits.map { hits in
            let documents = Double(hits.count)
            return log(1 + (count - documents + 0.5) / (documents + 0.5))
        }
        let smallest = partHits.min { $0.count < $1.count } ?? [:]
        var scored: [(id: String, score: Double)] = []
        for id in smallest.keys where partHits.allSatisfy({ $0[id] != nil }) {
            let length = Double(partLengths[id] ?? 0)
            let norm = 1.2 * (0.25 + 0.75 * (meanLength > 0 ? length / meanLength : 1))
            var score = 0.0
            for (hits, weight) in zip(partHits, weights) {
                let frequency = Double(hits[id] ?? 0)
                score += weight * frequency * 2.2 / (frequency + norm)
            }
            scored.append((id, score))
        }
        scored.sort { $0.score != $1.score ? $0.score > $1.score : UTF8Order.less($0.id, $1.id) }

        // The objects, read from the same moment: in rank order until the limit is met, or all
        // of them for another order.
        func object(_ id: String) throws -> Object? {
            try db.withValue(forKey: Keys.object(prefix: objectPrefix, id), snapshot: snapshot) { bytes in
                try bytes.map { Object(id: id, storedAttributes: try StoredObject.decode($0, model: name, id: id)) }
            }
        }
        var matches: [TextMatch] = []
        for (id, score) in scored {
            if order.isEmpty, let limit, matches.count >= limit { break }
            guard let found = try object(id), condition.matches(found) else { continue }
            matches.append(TextMatch(object: found, score: score))
        }
        if !order.isEmpty {
            let scores = Dictionary(uniqueKeysWithValues: matches.map { ($0.object.id, $0.score) })
            matches = order.sorted(matches.map(\.object)).map { TextMatch(object: $0, score: scores[$0.id] ?? 0) }
            if let limit { matches = Array(matches.prefix(limit)) }
        }
        guard let select else { return matches }
        let projection = Query(select: select)
        return matches.map { TextMatch(object: projection.project($0.object), score: $0.score) }
    }

    /// How ``search(_:where:order:limit:select:)`` would run, in words.
    public func explainSearch(_ text: String) throws -> String {
        let query = try TextQuery(parsing: text)
        let entry = try store.entry(name)
        guard let index = entry.indexes.first(where: { $0.state == .ready && $0.definition.kind == .text }) else {
            throw SatchelError(.unindexedQuery, "model '\(name)' has no text index to search", model: name)
        }
        let parts = query.parts.map { part in
            switch part {
            case .word(let word): word
            case .prefix(let start): start + "*"
            case .phrase(let words): "\"" + words.joined(separator: " ") + "\""
            }
        }
        return "text index \(index.definition): \(parts.joined(separator: " AND ")), ranked by BM25"
    }
}
