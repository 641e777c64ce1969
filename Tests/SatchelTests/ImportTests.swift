import Foundation
import PropertyBased
import SatchelTestSupport
import Synchronization
import Testing

@testable import Satchel

private func write(_ text: String, to directory: TemporaryDirectory, name: String = "input.json") -> URL {
    let url = URL(fileURLWithPath: directory.child(name))
    try! Data(text.utf8).write(to: url)
    return url
}

@Suite("Import")
struct ImportTests {
    @Test(
        "export to a file replaces an earlier one whole, leaving no partial file; a file it cannot write is an io error that leaves the earlier one as it was"
    )
    func exportReplacesWhole() throws {
        try withTemporaryStore { store in
            let directory = TemporaryDirectory()
            let file = directory.child("out.jsonl")
            try Data("an earlier export\n".utf8).write(to: URL(fileURLWithPath: file))
            let model = try store.model("M")
            for i in 0..<3 { try model.create(["object": .string("m\(i)"), "n": .int(Int64(i))]) }
            #expect(try model.export(to: URL(fileURLWithPath: file)) == 3)
            let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 3 && lines[0] == #"{"n":0,"object":"m0"}"#)
            #expect(!FileManager.default.fileExists(atPath: file + ".partial"))
            // The partial file cannot be made (a directory holds its name): the earlier file stays.
            try FileManager.default.createDirectory(atPath: file + ".partial", withIntermediateDirectories: false)
            let error = #expect(throws: SatchelError.self) { try model.export(to: URL(fileURLWithPath: file)) }
            #expect(error?.code == .io && error?.message.contains("out.jsonl") == true)
            #expect(try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n") == lines)
        }
    }

    @Test(
        "a file that changes while it is imported (cut, or grown, by another process) is an io error saying how much was written; what was not checked is never written (found by a black-box probe)",
        arguments: ["cut", "grown"])
    func fileChangedWhileImported(_ change: String) throws {
        try withTemporaryStore { store in
            let directory = TemporaryDirectory()
            let lines = (0..<3000).map { #"{"object":"i\#($0)","n":\#($0)}"# }
            let url = write(lines.joined(separator: "\n") + "\n", to: directory)
            let model = try store.model("M")
            let error = #expect(throws: SatchelError.self) {
                try store.importObjects(from: url, into: model, batchSize: 1000) { progress in
                    guard progress.phase == .writing, progress.batches == 1 else { return }
                    let handle = try! FileHandle(forWritingTo: url)
                    if change == "cut" {
                        try! handle.truncate(atOffset: UInt64(lines.prefix(2500).joined(separator: "\n").utf8.count + 5))
                    } else {
                        try! handle.seekToEnd()
                        try! handle.write(contentsOf: Data(#"{"object":"unchecked","n":-1}"#.utf8 + [10]))
                    }
                    try! handle.close()
                }
            }
            #expect(error?.code == .io && error?.message.contains("changed while it was imported") == true, "\(String(describing: error))")
            // How much was written depends on how far the reading thread was (it reads ahead);
            // the message says it, and nothing unchecked is among it.
            #expect(error?.message.contains("items were written") == true, "\(String(describing: error))")
            #expect(try model.count() <= 3000)
            #expect(try model.find("unchecked") == nil)
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a JSON array and JSON lines both import; given ids are kept")
    func formats() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let array = write(#"[{"object":"a","n":1}, {"n":2} ,{"object":"c","n":3}]"#, to: directory)
            #expect(try store.importObjects(from: array, into: products) == 3)
            let lines = write("{\"object\":\"d\",\"n\":4}\n\n{\"n\":5}\r\n  {\"object\":\"a\",\"n\":10}\n", to: directory, name: "b.jsonl")
            #expect(try store.importObjects(from: lines, into: products) == 3)
            #expect(try products.count() == 5)
            #expect(try products.find("a")?.attributes == ["n": 10])
            #expect(try products.find("d")?["n"] == 4)
            #expect(try products.findAll(where: ["n": 5]).count == 1)
        }
    }

    @Test("an empty file or array imports nothing", arguments: ["", "  \n", "[]", " [ ] \n", "\u{FEFF}[]"])
    func empty(_ text: String) throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let model = try store.model("P")
            #expect(try store.importObjects(from: write(text, to: directory), into: model) == 0)
        }
    }

    @Test(
        "a bad file changes nothing, even when the fault is at its very end",
        arguments: [
            ("[{\"a\":1},{\"a\":2},", "unterminated array"), ("[{\"a\":1},{\"a\":2}", "unterminated array"),
            ("[{\"a\":1}] [", "after the closing"), ("[{\"a\":1},,{\"a\":2}]", "unexpected ','"),
            ("{\"a\":1}\n{\"a\":2}\n{\"a\":", "line 3003, column 6 (item 3003)"),
            ("{\"a\":1}\n[2]\n", "line 3002 (item 3002): expected a JSON object"),
            ("{\"a\":1}\n{\"object\":7,\"a\":1}\n", "must be a string"), ("{\"a\":1}\n{\"a\":null}\n", "at least one non-null"),
            ("{\"a\":1}\n{\"a\":\"\\ud800\"}\n", "lone high surrogate"),
            ("{\"a\":1} {\"b\":tru}", "line 3001, column 14 (item 3002): invalid literal"),
            ("{\"a\":1}//c", "line 3001, column 8 (item 3002): unexpected character '/'"),
            ("[{\"a\":1},\n {\"b\":tru}]", "line 2, column 7 (item 3002): invalid literal"),
            ("[" + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "]", "nesting deeper"),
            ("{\"a\":\n1}\n{\"a\":1}\n[2]\n", "line 3004 (item 3003): expected a JSON object"),
            ("{\"object\":\"a\",\"object\":5}\n", "must be a string"), ("{\"x\":1,\"x\":null}\n", "at least one non-null"),
            ("{\"obj\\u0065ct\":7,\"a\":1}\n", "must be a string"),
        ])
    func badFile(_ testCase: (String, String)) throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try products.create(["object": "existing", "v": 1])
            let before = try dump(store)
            let lines = (0..<3000).map { "{\"object\":\"o\($0)\",\"v\":\($0)}" }
            // Thousands of good items first: more than one batch would land if the check were lazy.
            let text: String
            if testCase.0.hasPrefix("[") {
                text = "[" + lines.joined(separator: ",") + "," + testCase.0.dropFirst()
            } else {
                text = lines.joined(separator: "\n") + "\n" + testCase.0
            }
            do {
                try store.importObjects(from: write(text, to: directory), into: products, batchSize: 100)
                Issue.record("the import should fail")
            } catch let error as SatchelError {
                #expect([.malformedJSON, .invalidObject].contains(error.code))
                #expect(error.message.contains(testCase.1), "\(error.message)")
            }
            #expect(try dump(store) == before)
        }
    }

    @Test("a fixed-schema violation anywhere in the file changes nothing")
    func schemaViolation() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let prices = try store.register(ModelDefinition(name: "Price", kind: .fixedSchema(["sku": .string, "amount": .number])))
            let before = try dump(store)
            let text = (0..<500).map { "{\"sku\":\"s\($0)\",\"amount\":\($0)}" }.joined(separator: "\n") + "\n{\"sku\":\"x\",\"amount\":\"free\"}"
            expectError(.schemaViolation) { try store.importObjects(from: write(text, to: directory), into: prices, batchSize: 50) }
            #expect(try dump(store) == before)
        }
    }

    @Test("items are written in whole batches, each reported")
    func batches() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let text = (0..<1050).map { "{\"i\":\($0)}" }.joined(separator: "\n")
            var committed: [Int] = []
            try store.importObjects(from: write(text, to: directory), into: products, batchSize: 100) { progress in
                if progress.phase == .writing && progress.batches > 0 { committed.append(progress.items) }
            }
            #expect(committed == Array(stride(from: 100, through: 1000, by: 100)) + [1050])
            #expect(try products.count() == 1050)
            #expect(try products.pendingChanges().count == 1050)
        }
    }

    /// The model's statistics record as the store holds it on disk.
    static func storedStatistics(_ store: Store, _ model: String) throws -> StoredStatistics? {
        try store.database(.user).get(Keys.modelStatistics(model)).map { bytes in
            try bytes.withUnsafeBytes { try StoredStatistics(decoding: $0) }
        }
    }

    @Test("an import marks its model's stored statistics before its first batch and writes them exact after its last; the batches between leave them")
    func statisticsAtTheEnds() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let products = try store.model("Product")
            _ = try products.create(["n": -1])
            let before = try #require(try Self.storedStatistics(store, "Product"))
            #expect(!before.recountDue && before.objects == 1)
            let text = (0..<500).map { "{\"i\":\($0),\"tags\":[\($0)]}" }.joined(separator: "\n")
            var seen: [(stored: StoredStatistics?, counted: Int)] = []
            try store.importObjects(from: write(text, to: directory), into: products, batchSize: 100) { progress in
                guard progress.phase == .writing && progress.batches > 0 else { return }
                seen.append((try? Self.storedStatistics(store, "Product"), (try? products.count()) ?? -1))
            }
            #expect(seen.map(\.counted) == [101, 201, 301, 401, 501], "the counts in memory follow every batch")
            for (stored, _) in seen {
                var marked = before
                marked.recountDue = true
                #expect(stored == marked, "on disk: the record before the import, marked")
            }
            let after = try #require(try Self.storedStatistics(store, "Product"))
            #expect(!after.recountDue && after.objects == 501 && after.pendingCreates == 501 && after.arrays == [NameKey("tags"): 500])
            #expect(try store.entry("Product").statistics == after)
            #expect(try store.verify().problems == [])
        }
    }

    @Test("an import that fails in its writing pass writes its model's statistics exact, unmarked")
    func statisticsAfterAFailure() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let notes = try store.register(ModelDefinition(name: "Note", kind: .fixedSchema(["n": .number, "p": .string])))
            // 2.6 MB: the writing pass reads it in chunks of 1 MiB, the last one long after the first
            // batch.
            let pad = String(repeating: "x", count: 70)
            let lines = (0..<30_000).map { "{\"n\":\(10_000 + $0),\"p\":\"\(pad)\"}" }
            let url = write(lines.joined(separator: "\n"), to: directory)
            #expect {
                try store.importObjects(from: url, into: notes, batchSize: 1000) { progress in
                    // The file changes under the writing pass, in place: its last item breaks the schema.
                    if progress.phase == .writing && progress.batches == 1 {
                        let changed = lines.dropLast() + ["{\"n\":\"abc\",\"p\":\"\(pad)\"}"]
                        try? Data(changed.joined(separator: "\n").utf8).write(to: url)
                    }
                }
            } throws: { error in
                // Said as a change of the file, not as a refusal of it (a black-box probe).
                let error = error as? SatchelError
                return error?.code == .io && error?.message.contains("changed while it was imported: its first 29000 items") == true
            }
            let stored = try #require(try Self.storedStatistics(store, "Note"))
            let inMemory = try store.entry("Note").statistics
            #expect(!stored.recountDue && stored.objects == 29_000 && stored == inMemory)
            #expect(try notes.count() == 29_000)
            #expect(try store.verify().problems == [])
        }
    }

    @Test("a store copied while an import writes (the files a crash leaves) opens with its model counted from the data")
    func statisticsAfterACrash() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        let copy = directory.child("crashed")
        do {
            let store = try Store(path: path)
            let products = try store.model("Product")
            let text = (0..<1000).map { "{\"object\":\"p\($0 + 1000)\",\"tags\":[1]}" }.joined(separator: "\n")
            try store.importObjects(from: write(text, to: directory), into: products, batchSize: 100) { progress in
                if progress.phase == .writing && progress.batches == 3 { try? FileManager.default.copyItem(atPath: path, toPath: copy) }
            }
            try store.close()
        }
        let store = try Store(path: copy)
        defer { try? store.close() }
        let products = try store.model("Product")
        let objects = try products.findAll().count
        #expect(objects == 300)
        #expect(try products.count() == objects)
        let stored = try #require(try Self.storedStatistics(store, "Product"))
        #expect(!stored.recountDue && stored.objects == objects && stored.pendingCreates == objects && stored.arrays == [NameKey("tags"): objects])
        #expect(try store.verify().problems == [])
    }

    @Test("ids repeated within a batch and across batches replace, into an empty model and a full one; the change log and statistics agree")
    func repeatedIDs() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let products = try store.model("Product")
            let first = [
                #"{"object":"a","n":1}"#, #"{"object":"b","n":2}"#,  // batch 1
                #"{"object":"a","n":3}"#, #"{"object":"c","n":1}"#,  // batch 2: a again
                #"{"object":"c","n":2}"#, #"{"object":"b","n":null}"#,  // batch 3: c again in its batch's neighbour, b deleted
                #"{"n":7}"#,
            ]
            #expect(try store.importObjects(from: write(first.joined(separator: "\n"), to: directory), into: products, batchSize: 2) == 7)
            #expect(try products.find("a")?.attributes == ["n": 3])
            #expect(try products.find("b") == nil)
            #expect(try products.find("c")?.attributes == ["n": 2])
            #expect(try products.count() == 3)
            // Created and deleted before any push: nothing to send for b.
            #expect(try products.pendingChanges().map(\.kind) == [.create, .create, .create])

            // Into a model that has objects from the server and no pending change: updates.
            let orders = try store.model("Order")
            try store.bulkUpdate { tx in
                _ = try tx.writeServerObject(orders, "o1", ["total": 1, "note": "x"])
                _ = try tx.writeServerObject(orders, "o2", ["total": 2])
            }
            let second = [#"{"object":"o1","total":5}"#, #"{"object":"o3","total":3}"#, #"{"object":"o1","total":6}"#]
            #expect(try store.importObjects(from: write(second.joined(separator: "\n"), to: directory, name: "o.jsonl"), into: orders) == 3)
            let pending = Dictionary(uniqueKeysWithValues: try orders.pendingChanges().map { ($0.objectID, $0) })
            #expect(pending["o1"]?.kind == .update)
            #expect(pending["o1"]?.attributes == ["note": .null, "total": 6])
            #expect(pending["o3"]?.kind == .create)
            #expect(pending["o2"] == nil)
            #expect(try orders.find("o1")?.attributes == ["total": 6])
            #expect(try orders.count() == 3)
            #expect(try store.verify().problems == [])
        }
    }

    @Test(
        "a file whose ids come in order (read in key order) leaves what the same file shuffled leaves: over objects already stored, from the server and local, with an index"
    )
    func orderedIDsMatchShuffled() throws {
        let directory = TemporaryDirectory()
        let ids = (0..<1500).map { "item-" + String(10_000 + 3 * $0) }
        var lines = ids.enumerated().map { n, id in #"{"object":"\#(id)","n":\#(n),"group":"g\#(n % 7)"}"# }
        lines += [#"{"object":"item-10000","n":null,"group":null}"#]  // the first deleted again, in the last batch
        var generator = SystemRandomNumberGenerator()
        var results: [(objects: [Object], group: [String], pending: [String])] = []
        for (name, text) in [("ordered", lines), ("shuffled", Array(lines.dropLast()).shuffled(using: &generator) + [lines.last!])] {
            try withTemporaryStore { store in
                let model = try store.register(ModelDefinition(name: "Item", syncType: .incremental))
                try model.createIndex(IndexDefinition("group"))
                // Some of the ids are there already: every fifth from the server, every
                // eleventh created here; some ids between the file's too.
                try store.bulkUpdate { tx in
                    for (n, id) in ids.enumerated() where n % 5 == 0 { try tx.writeServerObject(model, id, ["n": -1, "group": "old", "kept": true]) }
                    for (n, id) in ids.enumerated() where n % 11 == 0 {
                        _ = try tx.save(Object(id: id, attributes: ["n": -2, "group": "old"]), in: model)
                    }
                    for n in 0..<50 {
                        _ = try tx.save(Object(id: "item-" + String(10_001 + 3 * n), attributes: ["n": -3, "group": "between"]), in: model)
                    }
                }
                let url = write(text.joined(separator: "\n"), to: directory, name: "\(name).jsonl")
                #expect(try store.importObjects(from: url, into: model, batchSize: 600) == 1501)
                let group = try model.findAll(where: ["group": "g3"]).map(\.id)
                let pending = try model.pendingChanges().map { "\($0.objectID) \($0.kind)" }.sorted()
                results.append((try model.findAll(), group, pending))
                #expect(try store.verify().problems == [])
            }
        }
        #expect(results[0].objects.count == 1499 + 50)
        #expect(results[0].objects == results[1].objects)
        #expect(results[0].group == results[1].group)
        #expect(results[0].pending == results[1].pending)
        let byID = Dictionary(uniqueKeysWithValues: results[0].objects.map { ($0.id, $0) })
        // Imported over a server object: replaced whole (its other attribute gone).
        #expect(byID[ids[5]]?.attributes == ["n": 5, "group": "g5"])
        #expect(byID[ids[0]] == nil && byID["item-10001"]?["group"] == "between")
    }

    @Test("the reader finds the same items whatever the chunk boundaries")
    func chunkBoundaries() async throws {
        let directory = TemporaryDirectory()
        let objects = Generator<[JSONValue], Shrink.None<[JSONValue]>>(run: { rng in
            (0..<Int.random(in: 0...6, using: &rng)).map { _ in
                .object(JSONObject([("k", TupleGen.value(&rng)), ("s", .string(TupleGen.string(&rng) + "]}\"\\,"))]))
            }
        })
        // Chunks of a few bytes cut every item (the scan finds them); larger ones hold some whole
        // (parsed, or checked, where they lie).
        let chunks = Generator<Int, Shrink.None<Int>>(run: { rng in
            Bool.random(using: &rng) ? Int.random(in: 1...9, using: &rng) : Int.random(in: 10...400, using: &rng)
        })
        await propertyCheck(count: 300, input: objects, chunks, Gen.bool, Gen.bool) { items, chunk, asArray, building in
            let texts = items.map { String(decoding: $0.jsonBytes, as: UTF8.self) }
            let text = asArray ? "[\n" + texts.joined(separator: " ,\n") + "\n]" : texts.joined(separator: "\n")
            let url = write(text, to: directory, name: "chunks-\(UUID().uuidString).json")
            var reader = try JSONItemReader(url: url, chunkSize: chunk, building: building)
            var read: [JSONValue] = []
            while let item = try reader.next() {
                let value = try JSONValue(parsing: Array(item.bytes))
                read.append(value)
                #expect(item.line == read.count + (asArray ? 1 : 0))
                if let parsed = item.value { #expect(building && parsed.isIdentical(to: value)) }
                if let shape = item.shape {
                    #expect(!building && shape.exact)
                    #expect(shape.id == nil && shape.hasAttribute == !(value.objectValue?.removingNulls().isEmpty ?? true))
                }
            }
            #expect(read.count == items.count)
            #expect(zip(read, items).allSatisfy { $0.isIdentical(to: $1) })
        }
    }

    @Test(
        "the check split over two threads finds what one reader finds: the same count, or the same first problem, wherever the halfway item lies"
    )
    func splitCheckMatchesOneReader() async throws {
        let directory = TemporaryDirectory()
        let schema = ModelDefinition(name: "Fixed", kind: .fixedSchema(["n": .number, "t": .string]))
        let files = Generator<String, Shrink.None<String>>(run: { rng in
            let count = Int.random(in: 0...40, using: &rng)
            var items: [String] = (0..<count).map { n in
                switch Int.random(in: 0..<80, using: &rng) {
                case 0: return #"{"n":"\#(n)"}"#  // a wrong type for the fixed schema
                case 1: return #"{"object":\#(n)}"#  // a number as the id
                // Pretty-printed: objects at the start of lines inside an item.
                case 2..<20: return "{\n  \"object\": \"i\(n)\",\n  \"n\": \(n),\n  \"inner\": \n{\"a\": {\n\"b\": 1}}\n}"
                // A string holding what looks like an item's start once unescaped.
                case 20..<32: return #"{"n":\#(n),"s":"x\n{\"n\":1}\n,{"}"#
                case 32..<60: return #"{"object":"i\#(n)","n":\#(n)}"#
                default: return #"{"n":\#(n), "t":"\#(String(repeating: "z", count: Int.random(in: 0...300, using: &rng)))"}"#
                }
            }
            // Now and then a malformed item or a stray token somewhere.
            if count > 0 && Int.random(in: 0..<6, using: &rng) == 0 { items[Int.random(in: 0..<count, using: &rng)] = #"{"n": 1,,}"# }
            let asArray = Bool.random(using: &rng)
            let body = asArray ? "[\n" + items.joined(separator: ",\n") + "\n]" : items.joined(separator: "\n")
            return (Bool.random(using: &rng) ? "\u{FEFF}" : "") + body + (asArray && Int.random(in: 0..<8, using: &rng) == 0 ? "\n{}" : "")
        })
        await propertyCheck(count: 400, input: files, Gen.bool) { text, fixed in
            let url = write(text, to: directory, name: "split-\(UUID().uuidString).json")
            let definition = fixed ? schema : ModelDefinition(name: "Bag")
            func outcome(splitFrom: Int, chunkSize: Int) -> String {
                do {
                    return "\(try Store.checkImportItems(of: url, definition: definition, chunkSize: chunkSize, splitFrom: splitFrom)) items"
                } catch {
                    return "\(error)"
                }
            }
            let alone = outcome(splitFrom: .max, chunkSize: JSONItemReader.defaultChunkSize)
            #expect(outcome(splitFrom: 0, chunkSize: JSONItemReader.defaultChunkSize) == alone, "\(text)")
            #expect(outcome(splitFrom: 0, chunkSize: 37) == alone, "\(text)")
        }
    }

    @Test("a large file is checked in two halves and imports whole; a problem in either half is named as one reader names it")
    func splitCheckOnALargeFile() throws {
        let directory = TemporaryDirectory()
        let lines = (0..<8_000).map { n in #"{"object":"i\#(10_000 + n)","n":\#(n),"pad":"\#(String(repeating: "p", count: 400))"}"# }
        let url = write(lines.joined(separator: "\n"), to: directory, name: "large.jsonl")
        #expect(try Store.checkImportItems(of: url, definition: ModelDefinition(name: "Bag"), splitFrom: 1 << 20) == 8_000)
        for bad in [300, 6_000] {
            var broken = lines
            broken[bad] = #"{"object":7}"#
            let badURL = write(broken.joined(separator: "\n"), to: directory, name: "bad-\(bad).jsonl")
            let message = "line \(bad + 1) (item \(bad + 1)): the object id ('object') must be a string, got a number"
            #expect(throws: SatchelError(.invalidObject, message)) {
                try Store.checkImportItems(of: badURL, definition: ModelDefinition(name: "Bag"), splitFrom: 1 << 20)
            }
        }
        try withTemporaryStore { store in
            let model = try store.model("Item")
            #expect(try store.importObjects(from: url, into: model) == 8_000)
            #expect(try model.count() == 8_000)
        }
    }

    @Test("the write pass's read-ahead hands over every item in order, stops at a bad item, and ends when closed early")
    func readAhead() throws {
        let directory = TemporaryDirectory()
        let lines = (0..<2500).map { "{\"object\":\"o\($0)\",\"v\":\($0)}" }
        let reader = try BatchReader(url: write(lines.joined(separator: "\n"), to: directory), batchSize: 1000)
        var sizes: [Int] = []
        var ids: [String] = []
        while let batch = try reader.next() {
            sizes.append(batch.objects.count)
            ids += batch.objects.compactMap { $0.0["object"]?.stringValue }
            #expect(batch.objects.allSatisfy { $0.1 != nil }, "Satchel's own text is stored as it is")
        }
        // The end stays the end.
        #expect(try reader.next() == nil)
        reader.close()
        #expect(sizes == [1000, 1000, 500])
        #expect(ids == (0..<2500).map { "o\($0)" })

        let bad = try BatchReader(
            url: write((lines.prefix(2100) + ["{\"v\":"]).joined(separator: "\n"), to: directory, name: "bad.jsonl"), batchSize: 1000)
        #expect(try bad.next()?.objects.count == 1000)
        #expect(try bad.next()?.objects.count == 1000)
        #expect(throws: SatchelError.self) { try bad.next() }
        bad.close()

        // Stopped after one batch, while the thread reads the next or waits: close returns.
        for batchSize in [1, 10, 3000] {
            let early = try BatchReader(url: write(lines.joined(separator: "\n"), to: directory, name: "early.jsonl"), batchSize: batchSize)
            #expect(try early.next()?.objects.count == min(batchSize, 2500))
            early.close()
        }
    }

    @Test("an item read where it lies counts the lines it spans")
    func linesOfItemsReadInPlace() throws {
        let directory = TemporaryDirectory()
        let text = "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n\n{\"c\":3}\n[\n4]\n{\"d\":"
        for building in [true, false] {
            var reader = try JSONItemReader(url: write(text, to: directory), building: building)
            var lines: [Int] = []
            while let item = try reader.next() { lines.append(item.line) }
            #expect(lines == [1, 8, 9, 11], "building: \(building)")
        }
    }

    @Test(
        "hostile files are refused whole within bounded memory: a 33 MB item, ten million values in one item, 100,000 levels, a pipe",
        arguments: ["huge", "values", "nesting", "pipe"])
    func hostileFiles(_ kind: String) async throws {
        let directory = TemporaryDirectory()
        let url = URL(fileURLWithPath: directory.child("hostile.jsonl"))
        let good = #"{"object":"first","n":1}"# + "\n"
        switch kind {
        case "huge": try Data((good + #"{"a":""# + String(repeating: "x", count: 33 << 20) + "\"}\n").utf8).write(to: url)
        case "values": try Data((good + #"{"a":["# + String(repeating: "0,", count: 9_999_999) + "0]}\n").utf8).write(to: url)
        case "nesting":
            try Data((good + #"{"a":"# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}\n").utf8).write(to: url)
        default: #expect(mkfifo(url.path, 0o600) == 0)  // nothing ever writes to it: opening it would wait for ever
        }
        try await withTemporaryStore { store in
            let model = try store.model("Product")
            let before = try dump(store)
            // Reading the file is long (seconds in a debug build): off the concurrency pool.
            let imported = await onOwnThread { try store.importObjects(from: url, into: model) }
            let error = #expect(throws: SatchelError.self) { try imported.get() }
            let expected: [String: (SatchelError.Code, String)] = [
                "huge": (.malformedJSON, "an item longer than \(32 << 20) bytes"), "values": (.malformedJSON, "more than 2000000 values"),
                "nesting": (.malformedJSON, "nesting deeper than 256 levels"), "pipe": (.invalidArgument, "is not a regular file"),
            ]
            #expect(error?.code == expected[kind]?.0)
            #expect(error?.message.contains(expected[kind]!.1) == true, "\(String(describing: error))")
            #expect(try dump(store) == before, "nothing written, not even the good first item")
            let graph = await onOwnThread { try store.importGraph(from: url, model: "Graph") }
            #expect(throws: SatchelError.self) { try graph.get() }
            #expect(store.existingModel("Graph") == nil)
        }
    }

    @Test("a 5 MB value spans many chunks and imports whole")
    func hugeItem() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let big = String(repeating: "0123456789", count: 500_000)
            let url = write("[{\"object\":\"big\",\"s\":\"\(big)\"},{\"object\":\"small\",\"s\":\"x\"}]", to: directory)
            let model = try store.model("P")
            #expect(try store.importObjects(from: url, into: model) == 2)
            #expect(try model.find("big")?["s"]?.stringValue?.utf8.count == 5_000_000)
        }
    }

    @Test("the fixtures import, and orders refer to existing customers and products")
    func fixtures() throws {
        try withTemporaryStore { store in
            let products = try store.model("Product"), customers = try store.model("Customer"), orders = try store.model("Order")
            #expect(try store.importObjects(from: Fixtures.url("products.json"), into: products) == 300)
            #expect(try store.importObjects(from: Fixtures.url("customers.json"), into: customers) == 150)
            #expect(try store.importObjects(from: Fixtures.url("orders.jsonl"), into: orders) == 600)
            for order in try orders.findAll() {
                #expect(try customers.find(order["customer"]?.stringValue ?? "") != nil)
                for line in order["items"]?.arrayValue ?? [] {
                    #expect(try products.find(line["product"]?.stringValue ?? "") != nil)
                }
            }
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("a chunk read ahead and handed back is freed by the reading thread that made it, not by the caller")
    func recycledChunksFreedByTheReader() throws {
        /// Whether each object was freed by the thread that made it, by number.
        final class Log: Sendable {
            let freedWhereMade = Locked<[Int: Bool]>([:])
        }
        final class Made: Sendable {
            let thread = pthread_self()
            let log: Log
            let number: Int
            init(_ number: Int, _ log: Log) {
                self.number = number
                self.log = log
            }
            deinit {
                let same = pthread_equal(thread, pthread_self()) != 0
                log.freedWhereMade.withLock { $0[number] = same }
            }
        }
        struct Chunk: Sendable { var made: [Made] }
        for recycling in [true, false] {
            let log = Log()
            let reader = ReadAhead<Chunk>(start: { 0 }) { made in
                guard made < 6 else { return nil }
                made += 1
                return Chunk(made: (0..<3).map { Made((made - 1) * 3 + $0, log) })
            }
            var taken = 0
            while let chunk = try reader.next() {
                taken += 1
                if recycling { reader.recycle(chunk) }
            }
            reader.close()
            #expect(taken == 6)
            let freed = log.freedWhereMade.withLock { $0 }
            // Chunks 0-4 were handed back before the thread made its next one; chunk 5 after its last.
            for number in 0..<15 {
                #expect(freed[number] == recycling, "object \(number), recycling \(recycling)")
            }
        }
    }
}
