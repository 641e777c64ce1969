import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

/// Two orders, three levels deep: Order → Customer → Address (billing and shipping), and
/// Order → items[Product] → Brand; product p1 appears in both orders.
private let orders: JSONValue = [
    [
        "id": "o1", "total": 30,
        "customer": [
            "class": "Customer", "id": "c1", "name": "Ann",
            "billing": ["class": "Address", "id": "a1", "city": "Lyon"],
            "shipping": ["class": "Address", "id": "a2", "city": "Paris"],
        ],
        "items": [
            [
                "className": "Product", "objectId": "p1", "name": "Lamp", "price": 10,
                "brand": ["__type": "Object", "className": "Brand", "objectId": "b1", "name": "Acme"],
            ],
            ["className": "Product", "objectId": "p2", "name": "Desk"],
        ],
    ],
    [
        "id": "o2",
        "customer": ["class": "Customer", "id": "c1", "email": "ann@example.com"],
        "items": [["className": "Product", "objectId": "p1", "price": 12, "stock": 3]],
    ],
]

@Suite("ObjectGraph: decomposing nested objects")
struct ObjectGraphTests {
    @Test("a graph three levels deep becomes flat objects of each model, nested objects replaced by ids")
    func depth() throws {
        let graph = try ObjectGraph.decompose(orders, model: "Order")
        #expect(graph.roots == ["o1", "o2"])
        #expect(graph.objects["Order"]?["o1"] == ["total": 30, "customer": "c1", "items": ["p1", "p2"]])
        #expect(graph.objects["Order"]?["o2"] == ["customer": "c1", "items": ["p1"]])
        #expect(graph.objects["Address"]?["a1"] == ["city": "Lyon"])
        #expect(graph.objects["Brand"]?["b1"] == ["name": "Acme"])
        #expect(graph.objects["Product"]?["p2"] == ["name": "Desk"])
        #expect(
            graph.associations == [
                "Order": ["customer": "Customer", "items": "Product"],
                "Customer": ["billing": "Address", "shipping": "Address"],
                "Product": ["brand": "Brand"],
            ])
    }

    @Test("an object given twice is merged: later attributes override earlier ones per attribute")
    func duplicatesMerge() throws {
        let graph = try ObjectGraph.decompose(orders, model: "Order")
        #expect(graph.objects["Product"]?["p1"] == ["name": "Lamp", "price": 12, "stock": 3, "brand": "b1"])
        #expect(
            graph.objects["Customer"]?["c1"] == [
                "name": "Ann", "email": "ann@example.com", "billing": "a1", "shipping": "a2",
            ])
        #expect(graph.objects["Product"]?.count == 2 && graph.objects["Customer"]?.count == 1)
    }

    @Test("two attributes pointing to one class are two associations")
    func twoRelationsToOneClass() throws {
        let graph = try ObjectGraph.decompose(orders, model: "Order")
        #expect(graph.associations["Customer"] == ["billing": "Address", "shipping": "Address"])
        #expect(graph.objects["Address"]?.keys.sorted() == ["a1", "a2"])
    }

    @Test("a cycle by id (A → B → A) terminates, and A's second appearance merges into the first")
    func cycle() throws {
        let value: JSONValue = [
            "id": "a", "name": "first",
            "friend": ["class": "Person", "id": "b", "name": "B", "friend": ["class": "Person", "id": "a", "age": 40]],
        ]
        let graph = try ObjectGraph.decompose(value, model: "Person")
        #expect(graph.roots == ["a"])
        #expect(graph.objects["Person"]?["a"] == ["name": "first", "friend": "b", "age": 40])
        #expect(graph.objects["Person"]?["b"] == ["name": "B", "friend": "a"])
        #expect(graph.associations == ["Person": ["friend": "Person"]])
    }

    @Test("the class and id forms: class + id, className + objectId, __type Object, and object")
    func forms() throws {
        let value: JSONValue = [
            "object": "t1",
            "a": ["class": "A", "id": "x"],
            "b": ["className": "B", "objectId": "y", "v": 1],
            "c": ["__type": "Object", "className": "C", "objectId": "z", "v": 2],
            "d": ["class": "D", "object": "w", "v": 3],
            "e": ["__type": "Pointer", "className": "E", "objectId": "q"],
            "n": ["class": "N", "id": 42, "v": 4],
        ]
        let graph = try ObjectGraph.decompose(value, model: "T")
        #expect(graph.roots == ["t1"])
        #expect(graph.objects["T"]?["t1"] == ["a": "x", "b": "y", "c": "z", "d": "w", "e": "q", "n": "42"])
        #expect(graph.objects["A"]?["x"] == JSONObject())
        #expect(graph.objects["B"]?["y"] == ["v": 1])
        #expect(graph.objects["C"]?["z"] == ["v": 2])
        #expect(graph.objects["D"]?["w"] == ["v": 3])
        #expect(graph.objects["E"]?["q"] == JSONObject())
        #expect(graph.objects["N"]?["42"] == ["v": 4], "an integer id is its decimal text")
    }

    @Test("the class and id keys are not stored; a differing extra id key and other __type values are kept")
    func keysNotStored() throws {
        let value: JSONValue = [
            "className": "Order", "objectId": "o1", "id": "o1", "class": "Order",
            "customer": ["class": "Customer", "className": "Customer", "objectId": "c1", "id": 7, "name": "Ann"],
            "when": ["__type": "Date", "iso": "2024-01-01T00:00:00.000Z"],
            "note": ["class": "Note", "text": "no id: stays nested"],
            "tags": [["k": 1]],
        ]
        let graph = try ObjectGraph.decompose(value, model: "Ignored")
        #expect(graph.objects.keys.sorted() == ["Customer", "Order"], "a top-level object that names its class goes to that model")
        let order = try #require(graph.objects["Order"]?["o1"])
        #expect(
            order == [
                "customer": "c1", "when": ["__type": "Date", "iso": "2024-01-01T00:00:00.000Z"],
                "note": ["class": "Note", "text": "no id: stays nested"], "tags": [["k": 1]],
            ])
        #expect(graph.objects["Customer"]?["c1"] == ["name": "Ann", "id": 7])
        for attributes in graph.objects.values.flatMap(\.values) {
            #expect(!attributes.contains("object") && !attributes.contains("objectId") && !attributes.contains("className"))
        }
    }

    @Test("a top-level object without an id gets makeID()")
    func generatedIDs() throws {
        var next = 0
        let graph = try ObjectGraph.decompose([["n": 1], ["n": 2]], model: "M") {
            next += 1
            return "g\(next)"
        }
        #expect(graph.roots == ["g1", "g2"])
        #expect(graph.objects["M"] == ["g1": ["n": 1], "g2": ["n": 2]])
        #expect(try ObjectGraph.decompose(["n": 1], model: "M").roots.first?.count == 26)
    }

    /// A graph, the error's code, and words of its message.
    static let badGraphs: [(graph: JSONValue, code: SatchelError.Code, message: String)] = [
        ([["a": 1], 5], .invalidObject, "item 2: expected a JSON object, got a number"),
        ("text", .invalidObject, "expected a JSON object or an array of objects, got a string"),
        (["id": true, "a": 1], .invalidObject, "the id ('id') must be a string or an integer, got a boolean"),
        (["x": ["class": "C", "id": ["k": 1]]], .invalidObject, "attribute 'x': the id ('id') must be a string or an integer"),
        (["x": ["class": "", "id": "1"]], .invalidName, "a class name ('class') cannot be empty"),
        (["x": [["class": "C", "id": "1"], 3]], .invalidObject, "mixes objects that name a class and an id with other values"),
        (["x": [["class": "C", "id": "1"], ["class": "D", "id": "2"]]], .invalidObject, "objects of two classes"),
        (
            [["id": "1", "x": ["class": "C", "id": "1"]], ["id": "2", "x": ["class": "D", "id": "1"]]], .modelConflict,
            "item 2: M '2', attribute 'x': the attribute points to both 'C' and 'D'"
        ),
        (["a": .null], .invalidObject, "an object without an id needs at least one non-null attribute"),
    ]

    @Test("bad graphs are errors that say where", arguments: badGraphs)
    func badGraph(_ testCase: (graph: JSONValue, code: SatchelError.Code, message: String)) throws {
        let error = #expect(throws: SatchelError.self) { try ObjectGraph.decompose(testCase.graph, model: "M") }
        #expect(error?.code == testCase.code)
        #expect(error?.message.contains(testCase.message) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("\n") == false)
    }

    @Test("an empty model name is a model as any other")
    func emptyModel() throws {
        let graph = try ObjectGraph.decompose(["object": "x", "a": 1], model: "")
        #expect(graph.objects[""]?["x"] == ["a": 1])
    }
}

@Suite("ObjectGraph: importGraph and find(including:)")
struct ObjectGraphStoreTests {
    @Test("importGraph stores every model, declares the associations and records pending creates")
    func importsGraph() throws {
        try withTemporaryStore { store in
            let summary = try store.importGraph(orders, model: "Order")
            #expect(summary.roots == 2)
            #expect(summary.objects == ["Order": 2, "Customer": 1, "Address": 2, "Product": 2, "Brand": 1])
            #expect(try store.model("Product").find("p1")?.attributes == ["name": "Lamp", "price": 12, "stock": 3, "brand": "b1"])
            #expect(try store.model("Order").definition.associations == ["customer": "Customer", "items": "Product"])
            #expect(try store.model("Customer").definition.associations == ["billing": "Address", "shipping": "Address"])
            #expect(try store.model("Address").definition.associations.isEmpty)
            #expect(try store.model("Brand").pendingChanges().map(\.objectID) == ["b1"])
            #expect(try store.verify().isHealthy)
        }
    }

    @Test("merging into a stored object keeps its other attributes; existing associations stay")
    func mergesIntoStored() throws {
        try withTemporaryStore { store in
            try store.register(ModelDefinition(name: "Customer", associations: ["referrer": "Customer"]))
            try store.model("Customer").create(["object": "c1", "name": "Old", "phone": "555", "vip": true])
            let summary = try store.importGraph(
                ["id": "o1", "customer": ["class": "Customer", "id": "c1", "name": "Ann", "vip": .null]], model: "Order")
            #expect(summary.objects == ["Order": 1, "Customer": 1])
            #expect(try store.model("Customer").find("c1")?.attributes == ["name": "Ann", "phone": "555"])
            #expect(try store.model("Customer").definition.associations == ["referrer": "Customer"])
            // A reference without attributes to a stored object writes nothing.
            let again = try store.importGraph(["id": "o1", "customer": ["class": "Customer", "id": "c1"]], model: "Order")
            #expect(again.objects == ["Order": 1])
            #expect(try store.model("Customer").find("c1")?.attributes == ["name": "Ann", "phone": "555"])
        }
    }

    @Test("a top-level item that is a number: an error, and nothing written")
    func badItemWritesNothing() throws {
        try withTemporaryStore { store in
            try store.model("Order").create(["object": "o0", "total": 1])
            let before = try dump(store)
            let error = #expect(throws: SatchelError.self) {
                try store.importGraph([["id": "o1", "customer": ["class": "Customer", "id": "c1", "n": 1]], 7], model: "Order")
            }
            #expect(error?.code == .invalidObject && error?.message == "item 2: expected a JSON object, got a number")
            #expect(try dump(store) == before)
            #expect(store.existingModel("Customer") == nil)
        }
    }

    @Test("an association conflicting with a declared one: an error, and nothing written")
    func associationConflict() throws {
        try withTemporaryStore { store in
            try store.register(ModelDefinition(name: "Order", associations: ["customer": "Person"]))
            let before = try dump(store)
            let error = #expect(throws: SatchelError.self) { try store.importGraph(orders, model: "Order") }
            #expect(error?.code == .modelConflict)
            #expect(error?.message.contains("'customer' of model 'Order' is an association to 'Person'") == true)
            #expect(try dump(store) == before)
            #expect(store.models.map(\.name) == ["Order"])
        }
    }

    @Test("a fixed-schema violation anywhere in the graph writes nothing")
    func schemaViolation() throws {
        try withTemporaryStore { store in
            try store.register(ModelDefinition(name: "Brand", kind: .fixedSchema(["label": .string])))
            let before = try dump(store)
            #expect(throws: SatchelError.self) { try store.importGraph(orders, model: "Order") }
            #expect(try dump(store) == before)
        }
    }

    @Test("importGraph(from:) reads JSON lines and names the line of a bad item")
    func fromFile() throws {
        let directory = TemporaryDirectory()
        try withTemporaryStore { store in
            let good = URL(fileURLWithPath: directory.child("good.jsonl"))
            try Data(
                #"{"id":"o1","customer":{"class":"Customer","id":"c1","n":1}}\#n{"id":"o2","customer":{"class":"Customer","id":"c1","m":2}}"#.utf8
            ).write(to: good)
            #expect(try store.importGraph(from: good, model: "Order") == ImportGraphSummary(roots: 2, objects: ["Order": 2, "Customer": 1]))
            #expect(try store.model("Customer").find("c1")?.attributes == ["n": 1, "m": 2])
            let bad = URL(fileURLWithPath: directory.child("bad.jsonl"))
            try Data("{\"id\":\"o3\",\"x\":1}\n{\"id\":\"o4\",\"customer\":{\"class\":\"Customer\",\"id\":false}}\n".utf8).write(to: bad)
            let before = try dump(store)
            let error = #expect(throws: SatchelError.self) { try store.importGraph(from: bad, model: "Order") }
            #expect(error?.message.hasPrefix("line 2 (item 2): Order 'o4', attribute 'customer'") == true, "\(error?.message ?? "")")
            #expect(try dump(store) == before)
        }
    }

    @Test("find(including:) resolves one level, a path, an array, and leaves a missing target an id")
    func including() throws {
        try withTemporaryStore { store in
            try store.importGraph(orders, model: "Order")
            let orderModel = try store.model("Order")
            try orderModel.update("o2", with: ["items": ["p1", "p-missing"]])

            let one = try #require(try orderModel.find("o1", including: ["customer"]))
            #expect(
                one["customer"] == [
                    "object": "c1", "name": "Ann", "email": "ann@example.com", "billing": "a1", "shipping": "a2",
                ])
            #expect(one["items"] == ["p1", "p2"], "an association not named stays ids")

            let path = try #require(try orderModel.find("o1", including: ["customer.billing", "customer.shipping", "items.brand"]))
            #expect(path["customer"]?["billing"] == ["object": "a1", "city": "Lyon"])
            #expect(path["customer"]?["shipping"]?["city"] == "Paris")
            #expect(path["items"]?.arrayValue?.first?["brand"] == ["object": "b1", "name": "Acme"])
            #expect(path["items"]?.arrayValue?.last == ["object": "p2", "name": "Desk"])

            let array = try #require(try orderModel.find("o2", including: ["items"]))
            #expect(array["items"] == [["object": "p1", "name": "Lamp", "price": 12, "stock": 3, "brand": "b1"], "p-missing"])

            try store.model("Customer").delete("c1")
            #expect(try orderModel.find("o1", including: ["customer"])?["customer"] == "c1", "a missing target stays an id")
            #expect(try orderModel.find("nope", including: ["customer"]) == nil)
        }
    }

    @Test(
        "find(including:) refuses a path that is not an association, naming the model's associations",
        arguments: [
            ("total", "'total' is not an association of Order (its associations: customer, items)"),
            ("customer.name", "'name' is not an association of Customer (its associations: billing, shipping)"),
            ("customer.billing.city", "'city' is not an association of Address (it has none)"),
            ("customer..billing", "'customer..billing' is not an association path"),
        ])
    func badPath(_ testCase: (String, String)) throws {
        try withTemporaryStore { store in
            try store.importGraph(orders, model: "Order")
            let error = #expect(throws: SatchelError.self) { try store.model("Order").find("o1", including: [testCase.0]) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.hasPrefix(testCase.1) == true, "\(error?.message ?? "")")
        }
    }
}
