import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// Full-text search: random notes over a small vocabulary (case and diacritic variants, a
/// script without spaces) and random queries (words, prefixes, phrases), against a naive
/// evaluator written here: its own tokenizer and folding, its own BM25.
@Suite("Full-text search")
struct TextSearchTests {
    static let vocabulary = [
        "Lamp", "lamp", "LAMP", "café", "Cafe", "CAFÉ", "naïve", "naive", "reading", "read", "reader", "light", "Light", "brass", "東", "京",
        "タ", "lamps",
    ]

    /// Folding as the contract says, for this vocabulary: lowercase, without diacritics.
    static func fold(_ word: String) -> String {
        word.lowercased().replacingOccurrences(of: "é", with: "e").replacingOccurrences(of: "ï", with: "i")
    }

    /// The words of a text: split at spaces and punctuation; each CJK character its own word.
    static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        for character in text {
            if "東京タ".contains(character) {
                if !current.isEmpty { words.append(fold(current)) }
                current = ""
                words.append(String(character))
            } else if character.isLetter {
                current.append(character)
            } else {
                if !current.isEmpty { words.append(fold(current)) }
                current = ""
            }
        }
        if !current.isEmpty { words.append(fold(current)) }
        return words
    }

    static func text(_ rng: inout SplitMix64) -> String {
        (0..<Int.random(in: 1...6, using: &rng)).map { _ in vocabulary.randomElement(using: &rng)! }
            .joined(separator: [" ", " ", ", ", ". ", "-", ""].randomElement(using: &rng)!)
    }

    enum Part {
        case word(String), prefix(String), phrase([String])
    }

    static func query(_ rng: inout SplitMix64) -> (String, [Part]) {
        var text: [String] = []
        var parts: [Part] = []
        for _ in 0..<Int.random(in: 1...2, using: &rng) {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                let word = vocabulary.randomElement(using: &rng)!
                text.append(word)
                parts.append(.word(fold(word)))
            case 1:
                let word = fold(["lam", "rea", "caf", "br", "l", "nai"].randomElement(using: &rng)!)
                text.append(word + "*")
                parts.append(.prefix(word))
            default:
                let words = (0..<2).map { _ in ["reading", "lamp", "light", "café", "東", "京"].randomElement(using: &rng)! }
                text.append("\"" + words.joined(separator: " ") + "\"")
                parts.append(.phrase(words.map(fold)))
            }
        }
        return (text.joined(separator: " "), parts)
    }

    /// The naive answer: ids with their BM25 scores.
    /// The notes as the naive evaluator reads them: words and positions (the title's words, a
    /// gap, the body's), notes without words left out.
    static func documents(_ notes: [(id: String, title: String, body: String)]) -> [(String, [String], [Int])] {
        notes.map { note -> (String, [String], [Int]) in
            let title = words(note.title), body = words(note.body)
            return (note.id, title + body, Array(0..<title.count) + (0..<body.count).map { $0 + title.count + 1 })
        }.filter { !$0.1.isEmpty }
    }

    static func naive(_ documents: [(String, [String], [Int])], _ parts: [Part]) -> [String: Double] {
        let count = Double(documents.count)
        let mean = Double(documents.reduce(0) { $0 + $1.1.count }) / max(count, 1)
        func frequency(_ part: Part, _ words: [String], _ positions: [Int]) -> Int {
            switch part {
            case .word(let w): return words.filter { $0 == w }.count
            case .prefix(let p): return words.filter { $0.hasPrefix(p) }.count
            case .phrase(let ws):
                let at = Dictionary(zip(positions, words), uniquingKeysWith: { a, _ in a })
                return positions.filter { start in ws.enumerated().allSatisfy { at[start + $0] == $1 } }.count
            }
        }
        // A part asked twice counts once.
        var seen = Set<String>()
        let parts = parts.filter { seen.insert("\($0)").inserted }
        var scores: [String: Double] = [:]
        let frequencies = parts.map { part in documents.map { frequency(part, $0.1, $0.2) } }
        for (d, document) in documents.enumerated() where frequencies.allSatisfy({ $0[d] > 0 }) {
            var score = 0.0
            for row in frequencies {
                let df = Double(row.filter { $0 > 0 }.count), tf = Double(row[d])
                let idf = log(1 + (count - df + 0.5) / (df + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * Double(document.1.count) / mean))
            }
            scores[document.0] = score
        }
        return scores
    }

    @Test("random notes and queries: the matches are the naive evaluator's, best first by its BM25; writes keep the index right")
    func differential() async throws {
        var rng = SplitMix64(seed: 61)
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let model = try store.register(ModelDefinition(name: "Note", syncType: .none))
        // Enough notes that each word's postings span several blocks.
        var notes: [(id: String, title: String, body: String)] = []
        for i in 0..<900 {
            let note = (id: String(format: "n%03d", i), title: Self.text(&rng), body: Self.text(&rng))
            notes.append(note)
            _ = try model.put(["object": .string(note.id), "title": .string(note.title), "body": .string(note.body), "i": .int(Int64(i))])
        }
        // Backfilled in batches, with writes between them: objects the build has passed, objects
        // it has not reached (their postings land before the build's), a new one among them.
        var interleaved: [(id: String, title: String, body: String)] = []
        try model.createIndex(.text("title", "body"), batchSize: 100) { progress in
            guard progress.processed == 300 else { return }
            for i in [10, 650, 651, 899] {
                notes[i] = (id: notes[i].id, title: Self.text(&rng), body: Self.text(&rng))
                _ = try? model.update(notes[i].id, with: ["title": .string(notes[i].title), "body": .string(notes[i].body)])
            }
            let note = (id: "n650a", title: Self.text(&rng), body: Self.text(&rng))
            interleaved.append(note)
            _ = try? model.put(["object": .string(note.id), "title": .string(note.title), "body": .string(note.body), "i": 650])
        }
        notes += interleaved
        for round in 0..<3 {
            if round == 1 {
                // One transaction of writes in random order: updates (some twice), deletes, notes
                // before every other id and between them, a note without text.
                var updates: [(id: String, title: String, body: String)] = []
                for i in Array(stride(from: 0, to: 900, by: 7)).shuffled(using: &rng) + [14, 28, 700, 900] {
                    notes[i] = (id: notes[i].id, title: Self.text(&rng), body: Self.text(&rng))
                    updates.append(notes[i])
                }
                let deletes = Array(stride(from: 3, to: 900, by: 11)).shuffled(using: &rng).map { notes[$0].id }
                let inserts = ["a001", "a000", "n450x", "n450a", "zz"].map { (id: $0, title: Self.text(&rng), body: Self.text(&rng)) }
                notes += inserts
                let written = updates
                try await store.bulkUpdate { tx in
                    for note in written {
                        _ = try tx.update(note.id, with: ["title": .string(note.title), "body": .string(note.body)], in: model)
                    }
                    for id in deletes { _ = try tx.delete(id, in: model) }
                    for note in inserts {
                        _ = try tx.put(["object": .string(note.id), "title": .string(note.title), "body": .string(note.body), "i": 500], in: model)
                    }
                    _ = try tx.put(["object": "n999", "i": 999], in: model)
                }
                notes = notes.enumerated().filter { $0.offset >= 901 || $0.offset < 3 || ($0.offset - 3) % 11 != 0 }.map(\.element)
            }
            if round == 2 {
                // Most notes go: blocks empty and shrink.
                let (gone, kept) = (notes.filter { _ in Int.random(in: 0..<5, using: &rng) > 0 }, notes.filter { _ in true })
                try await store.bulkUpdate { tx in for note in gone { _ = try tx.delete(note.id, in: model) } }
                let goneIDs = Set(gone.map(\.id))
                notes = kept.filter { !goneIDs.contains($0.id) }
            }
            #expect(try store.verify().isHealthy, "round \(round)")
            let documents = Self.documents(notes)
            for _ in 0..<80 {
                // Yielding: seconds of CPU on one of the pool's threads would starve the
                // in-process HTTP servers of the tests running meanwhile.
                await Task.yield()
                let (text, parts) = Self.query(&rng)
                let expected = Self.naive(documents, parts)
                let found = try model.search(text)
                #expect(Set(found.map(\.object.id)) == Set(expected.keys), "\(text)")
                for (a, b) in zip(found, found.dropFirst()) {
                    #expect((expected[a.object.id] ?? 0) >= (expected[b.object.id] ?? 0) - 1e-9, "\(text): \(a.object.id) before \(b.object.id)")
                }
                for match in found {
                    #expect(abs(match.score - (expected[match.object.id] ?? -1)) < 1e-9, "\(text): the score of \(match.object.id)")
                }
                // With a condition and a limit: the same order, filtered, cut.
                let even = try model.search(text, where: Field("i") < 75, limit: 5)
                #expect(even.map(\.object.id) == Array(found.filter { ($0.object["i"]?.intValue ?? 999) < 75 }.prefix(5).map(\.object.id)), "\(text)")
            }
        }
        #expect(try store.verify().isHealthy)
    }

    @Test("check reports a posting block that disagrees with its objects; repair rebuilds it and search answers right again")
    func damagedPostings() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("store")
        do {
            let store = try Store(path: path)
            defer { try? store.close() }
            let model = try store.register(ModelDefinition(name: "Note", syncType: .none))
            for i in 0..<300 {
                _ = try model.put(["object": .string(String(format: "n%03d", i)), "title": .string(i % 2 == 0 ? "brass lamp" : "reading light")])
            }
            try model.createIndex(.text("title"))
            #expect(try store.verify().isHealthy)
            // The first block of "lamp" replaced by one naming n001, whose title has no lamp.
            let entry = try store.entry("Note")
            var batch = LevelDBWriteBatch()
            batch.put(
                entry.indexes[0].textBlockKey("lamp", firstID: "n000"),
                TextBlock.encode([(Array("n001".utf8), TextPosting(length: 2, positions: [1]))][...]))
            try store.database(entry.definition.partition).write(batch, sync: true)
            let report = try store.verify()
            #expect(report.problems.contains { $0.contains("posting of 'lamp' for 'n001' that does not match") }, "\(report.problems.prefix(3))")
            #expect(report.problems.contains { $0.contains("'n000' lacks its posting of 'lamp'") }, "\(report.problems.prefix(3))")
            #expect(report.problems.contains { $0.contains("stored statistics") })
        }
        _ = try Store.repair(path: path)
        let store = try Store(path: path)
        defer { try? store.close() }
        #expect(try store.verify().isHealthy)
        let found = try store.model("Note").search("lamp")
        #expect(found.count == 150 && found.allSatisfy { $0.object["title"] == "brass lamp" })
    }

    @Test("a posting block cut short, or random bytes: decoding throws corruption or gives postings that encode to the same bytes")
    func hostileBlocks() throws {
        var rng = SplitMix64(seed: 29)
        var id = 0
        let postings: [(id: [UInt8], posting: TextPosting)] = (0..<40).map { _ in
            id += Int.random(in: 1...300, using: &rng)
            let positions = (0..<Int.random(in: 1...4, using: &rng)).map { _ in Int.random(in: 0...5000, using: &rng) }.sorted()
            return (Array("note-\(id)".utf8), TextPosting(length: Int.random(in: 1...9000, using: &rng), positions: Array(Set(positions)).sorted()))
        }
        let block = TextBlock.encode(postings[...])
        #expect(try block.withUnsafeBytes { try TextBlock.decode($0) }.map(\.posting) == postings.map(\.posting))
        var inputs = (0..<block.count).map { Array(block[..<$0]) }
        for _ in 0..<2000 { inputs.append((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        for _ in 0..<500 {
            var flipped = block
            flipped[Int.random(in: 0..<flipped.count, using: &rng)] ^= UInt8(1 << Int.random(in: 0...7, using: &rng))
            inputs.append(flipped)
        }
        for input in inputs {
            do {
                let decoded = try input.withUnsafeBytes { try TextBlock.decode($0) }
                if decoded.isEmpty { continue }  // a count of zero and nothing after it
                let again = TextBlock.encode(decoded[...])
                #expect(try again.withUnsafeBytes { try TextBlock.decode($0) }.map(\.posting) == decoded.map(\.posting))
            } catch let error as SatchelError {
                #expect(error.code == .corruption)
            }
        }
    }

    @Test(
        "a Hangul syllable is one word, never its letters; a final sigma folds to sigma; a second text index is refused (found by a black-box probe)")
    func scriptsAndOneTextIndex() throws {
        #expect(TextTokens.words("한국 사과") == ["한", "국", "사", "과"])
        #expect(TextTokens.words("ΟΔΟΣ οδός Οδος") == ["οδοσ", "οδοσ", "οδοσ"])
        #expect(TextTokens.words("Café 東京") == ["cafe", "東", "京"])
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let model = try store.register(ModelDefinition(name: "Note", syncType: .none))
        _ = try model.put(["object": "k1", "title": "한국"])
        _ = try model.put(["object": "k2", "title": "사과"])
        _ = try model.put(["object": "g1", "title": "Η ΟΔΟΣ", "body": "goodbye"])
        try model.createIndex(.text("title"))
        #expect(try model.search("하").isEmpty && model.search("가").isEmpty, "no syllable made of another's letters")
        #expect(try model.search("한").map(\.object.id) == ["k1"])
        #expect(try model.search("\"사과\"").map(\.object.id) == ["k2"])
        #expect(try model.search("οδός").map(\.object.id) == ["g1"])
        #expect { try model.createIndex(.text("body")) } throws: {
            ($0 as? SatchelError)?.code == .invalidArgument && ($0 as? SatchelError)?.message.contains("text(title,body)") == true
        }
        // A field the index has already is named once (found by a black-box probe: text(title,body,title)).
        #expect { try model.createIndex(.text("body", "title")) } throws: {
            ($0 as? SatchelError)?.message.contains("(text(title,body))") == true
        }
        #expect(try model.indexes.map(\.definition.description) == ["text(title)"])
    }

    @Test("a query without a word, an unclosed phrase, or a model without a text index: one clear error")
    func mistakes() throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.child("store"))
        defer { try? store.close() }
        let model = try store.register(ModelDefinition(name: "Note", syncType: .none))
        _ = try model.put(["object": "n1", "title": "Brass lamp"])
        #expect { _ = try model.search("lamp") } throws: { ($0 as? SatchelError)?.code == .unindexedQuery }
        try model.createIndex(.text("title"))
        #expect { _ = try model.search("  ,. ") } throws: { ($0 as? SatchelError)?.code == .invalidArgument }
        #expect { _ = try model.search("\"brass lamp") } throws: { ($0 as? SatchelError)?.code == .invalidArgument }
        #expect(try model.search("BRASS").map(\.object.id) == ["n1"])
        #expect(try model.explainSearch("brass \"a lamp\" la*") == "text index text(title): brass AND \"a lamp\" AND la*, ranked by BM25")
    }
}
