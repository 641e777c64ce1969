import SatchelTestSupport
import Testing

@testable import Satchel

@Suite("Planner and explain")
struct PlannerTests {
    /// A store with 2,000 products and indexes on brand, price, (brand, price), tags[] and address.city.
    static func withShop(_ body: (Store, Model) throws -> Void) throws {
        try withTemporaryStore { store in
            let products = try store.model("Product")
            try store.bulkUpdate { tx in
                for i in 0..<2000 {
                    try tx.create(
                        [
                            "object": .string("p\(1000 + i)"), "brand": .string("B\(i % 40)"), "price": .int(Int64(i % 997)),
                            "name": .string("item \(i)"), "tags": .array(i % 3 == 0 ? ["sale", "new"] : ["new"]),
                            "address": ["city": .string(["Oslo", "Lyon", "Pune"][i % 3])],
                        ], in: products)
                }
            }
            for index in [
                IndexDefinition("brand"), IndexDefinition("price"), IndexDefinition("brand", "price"), .elements(of: "tags"),
                IndexDefinition("address.city"),
            ] {
                try products.createIndex(index)
            }
            try body(store, products)
        }
    }

    static func access(_ model: Model, _ query: Query) throws -> QueryPlan.Access { try model.explain(query).access }

    @Test("equality uses the index with the most fields fixed, and that index's order when it fits")
    func equality() throws {
        try Self.withShop { _, products in
            #expect(try Self.access(products, Query(where: "brand" == "B7")) == .index(IndexDefinition("brand")))
            let both = Query(where: "brand" == "B7" && "price" >= 100)
            #expect(try Self.access(products, both) == .index(IndexDefinition("brand", "price")))
            #expect(try products.explain(both).description.contains("brand == \"B7\", price >= 100"))
            let ordered = Query(where: "brand" == "B7").order(by: "price", descending: true).limit(5)
            let plan = try products.explain(ordered)
            #expect(plan.access == .index(IndexDefinition("brand", "price")))
            #expect(plan.deliversOrder)
            #expect(plan.description.contains("reverse index order"))
            let expected = try products.findAll(where: "brand" == "B7").sorted { ($0["price"]!.intValue!, $0.id) > ($1["price"]!.intValue!, $1.id) }
            #expect(try products.findAll(ordered).map(\.id) == expected.prefix(5).map(\.id))
        }
    }

    @Test("in is several seeks; a range with order and limit reads in index order")
    func inAndRanges() throws {
        try Self.withShop { _, products in
            let plan = try products.explain(Query(where: Field("brand").isIn(["B1", "B2", "B3"])))
            #expect(plan.access == .index(IndexDefinition("brand")))
            #expect(plan.description.contains("3 seeks"))
            let range = Query(where: "price" > 990).order(by: "price").limit(3)
            let rangePlan = try products.explain(range)
            #expect(rangePlan.access == .index(IndexDefinition("price")))
            #expect(rangePlan.deliversOrder)
            #expect(try products.findAll(range).map { $0["price"]! } == [991, 991, 992])
            #expect(try Self.access(products, Query(where: Field("address.city").beginsWith("Ly"))) == .index(IndexDefinition("address.city")))
        }
    }

    @Test("contains uses the array-element index; object lookups are gets")
    func elementsAndIDs() throws {
        try Self.withShop { _, products in
            #expect(try Self.access(products, Query(where: Field("tags").contains("sale"))) == .index(.elements(of: "tags")))
            #expect(try products.count(where: Field("tags").contains("sale")) == 667)
            #expect(try Self.access(products, Query(where: "object" == "p1500" && "brand" == "B20")) == .idLookup)
            #expect(try products.findAll(where: "object" == "p1500").map(\.id) == ["p1500"])
            let scan = try products.explain(Query(where: Field("object").beginsWith("p19")))
            #expect(scan.access == .scan)
            #expect(scan.description.contains("within object beginsWith \"p19\""))
            #expect(try products.count(where: Field("object").beginsWith("p19")) == 100)
        }
    }

    @Test("what no index serves is a scan, and explain says why")
    func scans() throws {
        try Self.withShop { _, products in
            let or = try products.explain(Query(where: "brand" == "B1" || "price" == 3))
            #expect(or.access == .scan)
            #expect(or.description.contains("no ready index fits"))
            #expect(try Self.access(products, Query(where: Field("name").beginsWith("item 1"))) == .scan)
            let sorted = try products.explain(Query(where: "name" != "x").order(by: "name").limit(10))
            #expect(sorted.access == .scan)
            #expect(sorted.description.contains("keeping the top 10"))
            // A range on one class cannot use the index for another: still answered right.
            #expect(try products.count(where: "price" < "a") == 0)
        }
    }

    @Test("findFirst on an indexed attribute reads one candidate, not the model")
    func lazyFirst() throws {
        try Self.withShop { _, products in
            let cursor = try products.cursor(Query(where: "brand" == "B3", limit: 1))
            #expect(try cursor.next()?["brand"] == "B3")
            #expect(try cursor.next() == nil)
            #expect(cursor.candidatesRead == 1)
            let ordered = try products.cursor(Query(where: "price" >= 500).order(by: "price").limit(2))
            #expect(try ordered.all().count == 2)
            #expect(ordered.candidatesRead == 2)
        }
    }

    @Test("an ordered query with a limit and no index keeps a bounded top-k")
    func boundedTopK() throws {
        try Self.withShop { _, products in
            let cursor = try products.cursor(Query(order: [.descending("name")], limit: 10))
            let top = try cursor.all()
            #expect(top.count == 10)
            #expect(cursor.candidatesRead == 2000)
            #expect(cursor.peakBuffered <= 1024)
            let names = try products.findAll().compactMap { $0["name"]?.stringValue }.sorted {
                Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8))
            }
            #expect(top.compactMap { $0["name"]?.stringValue } == Array(names.reversed().prefix(10)))
        }
    }

    @Test("a query reads one snapshot: writes during iteration are invisible")
    func snapshotIsolation() throws {
        try Self.withShop { _, products in
            let cursor = try products.cursor(Query(where: "brand" == "B5"))
            let first = try cursor.next()
            try products.delete(where: "brand" == "B5")
            try products.create(["brand": "B5", "price": 1])
            var rest: [Object] = []
            while let d = try cursor.next() { rest.append(d) }
            #expect(first != nil)
            #expect(rest.count == 49)
            #expect(try products.count(where: "brand" == "B5") == 1)
        }
    }

    @Test("projection keeps the selected attributes, nested ones as nested")
    func projection() throws {
        try Self.withShop { _, products in
            let d = try #require(try products.findAll(Query(where: "object" == "p1001").select("name", "address.city", "missing")).first)
            #expect(d.attributes == ["name": "item 1", "address": ["city": "Lyon"]])
        }
    }

    @Test("building an index reports progress; dropping removes every entry", arguments: [1, 7, 5000])
    func buildAndDrop(batchSize: Int) throws {
        try withTemporaryStore { store in
            let model = try store.model("M")
            try store.bulkUpdate { tx in for i in 0..<300 { try tx.create(["k": .int(Int64(i % 10))], in: model) } }
            var reports: [IndexBuildProgress] = []
            try model.createIndex(IndexDefinition("k"), batchSize: batchSize) { reports.append($0) }
            #expect(reports.last?.processed == 300)
            #expect(reports.count == 1 + (300 + batchSize - 1) / batchSize)
            #expect(try model.indexes.first?.entries == 300)
            try model.createIndex(IndexDefinition("k"))  // idempotent
            #expect(try model.indexes.count == 1)
            #expect(try model.dropIndex(IndexDefinition("k")))
            #expect(try model.dropIndex(IndexDefinition("k")) == false)
            #expect(try model.indexes.isEmpty)
            let prefix = Keys.indexModelPrefix("M")
            let iterator = try store.database(.user).makeIterator()
            iterator.seek(prefix)
            #expect(!(iterator.isValid && iterator.keyHasPrefix(prefix)))
            #expect(try store.verify().isHealthy)
        }
    }

    /// A store at `path` whose model M holds 50 objects, k = 0…49, indexed on k.
    static func indexedStore(_ path: String) throws -> Store {
        let store = try Store(path: path)
        let model = try store.model("M")
        for i in 0..<50 { try model.create(["k": .int(Int64(i))]) }
        try model.createIndex(IndexDefinition("k"))
        return store
    }

    @Test("an index survives reopening and an interrupted drop finishes at open")
    func persistence() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Self.indexedStore(path)
            try store.model("M").createIndex(IndexDefinition("j"))
            // Simulate a crash right after a drop began: the definition says dropping.
            let entry = try store.entry("M")
            var dropping = entry.indexes[1]
            dropping.state = .dropping
            var batch = LevelDBWriteBatch()
            batch.put(Keys.indexDefinition("M", dropping.id), dropping.json.jsonBytes)
            try store.database(.user).write(batch, sync: false)
            try store.close()
        }
        let store = try Store(path: path)
        defer { try? store.close() }
        let model = try store.model("M")
        #expect(try model.indexes.map(\.definition) == [IndexDefinition("k")])
        #expect(try model.explain(Query(where: "k" == 3)).access == .index(IndexDefinition("k")))
        #expect(try model.findAll(where: "k" > 47).count == 2)
        #expect(try store.verify().isHealthy)
    }

    @Test(
        "an index whose build was interrupted (a repair killed while rebuilding): its listing counts what it holds, explain and check name it, declaring it again finishes it (found by a black-box probe)"
    )
    func interruptedBuild() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Self.indexedStore(path)
            // Simulate a kill after a rebuild began: the definition says building, its entries gone.
            try Self.markFirstIndexBuilding(of: "M", in: store)
            try store.close()
        }
        do {
            let store = try Store(path: path)
            let model = try store.model("M")
            _ = try store.deleteKeys(withPrefix: Keys.indexModelPrefix("M"), of: "M", in: .user)
            let index = try #require(try model.indexes.first)
            #expect(!index.isReady)
            #expect(index.entries == 0, "what the index holds, not the count from before its build")
            let plan = try model.explain(Query(where: "k" == 3))
            #expect(plan.access == .scan)
            #expect(plan.description.contains("index k is incomplete"), "\(plan.description)")
            // An order the index would serve names it too; a condition it could not serve does
            // not (a black-box probe: named as the reason for a scan no index could avoid).
            let ordered = try model.explain(Query(order: [.ascending("k")], limit: 3))
            #expect(ordered.access == .scan && ordered.description.contains("index k is incomplete"), "\(ordered.description)")
            let other = try model.explain(Query(where: "j" == 3))
            #expect(other.access == .scan && !other.description.contains("index k"), "\(other.description)")
            #expect(other.description.contains("no ready index fits"), "\(other.description)")
            #expect(try model.findAll(where: "k" > 47).count == 2)
            let report = try store.verify()
            #expect(report.isHealthy)
            #expect(report.notes.count == 1 && report.notes[0].contains("index k") == true, "\(report.notes)")

            try model.createIndex(IndexDefinition("k"))
            #expect(try model.indexes.map(\.entries) == [50])
            #expect(try model.explain(Query(where: "k" == 3)).access == .index(IndexDefinition("k")))
            let finished = try store.verify()
            #expect(finished.isHealthy && finished.notes.isEmpty, "\(finished.notes)")
            try store.close()
        }
    }

    /// Writes `model`'s first index back as building, as a process killed during its build leaves it.
    static func markFirstIndexBuilding(of model: String, in store: Store) throws {
        var building = try store.entry(model).indexes[0]
        building.state = .building
        var batch = LevelDBWriteBatch()
        batch.put(Keys.indexDefinition(model, building.id), building.json.jsonBytes)
        try store.database(.user).write(batch, sync: false)
    }

    @Test(
        "a text index whose build was interrupted: a search says so and how to finish it, not that there is none (found by a black-box probe)"
    )
    func interruptedTextBuild() throws {
        let directory = TemporaryDirectory()
        let path = directory.child("s")
        do {
            let store = try Store(path: path)
            let notes = try store.register(ModelDefinition(name: "N"))
            for i in 0..<5 { try notes.create(["object": .string("n\(i)"), "title": .string(i == 3 ? "brass lamp" : "note \(i)")]) }
            try notes.createIndex(.text("title"))
            try Self.markFirstIndexBuilding(of: "N", in: store)
            try store.close()
        }
        let store = try Store(path: path)
        let notes = try store.model("N")
        let scan = try notes.explain(Query(where: "title" == "brass lamp"))
        #expect(scan.access == .scan && !scan.description.contains("text("), "\(scan.description)")
        for search in [{ _ = try notes.search("lamp") }, { _ = try notes.explainSearch("lamp") }] {
            do {
                try search()
                Issue.record("an unfinished text index answered")
            } catch let error as SatchelError {
                #expect(
                    error.code == .unindexedQuery && error.message.contains("was not finished")
                        && error.message.contains("satchel index N --text title"), "\(error)")
            }
        }
        try notes.createIndex(.text("title"))
        #expect(try notes.search("lamp").map(\.object.id) == ["n3"])
        try store.close()
    }

    @Test(
        "bad index definitions are refused",
        arguments: [
            IndexDefinition([Field]()), IndexDefinition("object"), IndexDefinition("a", "a"),
        ])
    func badDefinitions(_ definition: IndexDefinition) throws {
        try withTemporaryStore { store in
            expectError(.invalidArgument) { try store.model("M").createIndex(definition) }
        }
    }

    @Test("a condition that never holds reads nothing")
    func neverTrue() throws {
        try Self.withShop { _, products in
            let cursor = try products.cursor(Query(where: Condition.none && "brand" == "B1"))
            #expect(try cursor.all().isEmpty)
            #expect(cursor.candidatesRead == 0)
            #expect(try products.explain(Query(where: .none)).description.contains("never holds"))
            #expect(try products.count(where: !Condition.none) == 2000)
        }
    }

    @Test("the Swift builders read like the semantics")
    func builders() {
        let c: Condition = "price" < 100 && "brand" == "Apple"
        #expect(c.description == "price < 100 && brand == \"Apple\"")
        #expect((!(Field("a").exists() || Field("tags").contains("x"))).description == "!(a exists || tags contains \"x\")")
        #expect(Condition(equalities: ["a": 1, "b": "x"]).description == "a == 1 && b == \"x\"")
    }
}
