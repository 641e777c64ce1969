import Foundation
import SatchelTestSupport
import Testing

@testable import Satchel

@Suite("GraphCLI: import --graph and find --include")
struct GraphCLITests {
    static let file = """
        [{"id":"o1","total":30,"customer":{"class":"Customer","id":"c1","name":"Ann","address":{"class":"Address","id":"a1","city":"Lyon"}},
          "items":[{"className":"Product","objectId":"p1","name":"Lamp"},{"className":"Product","objectId":"p2","name":"Desk"}]},
         {"id":"o2","customer":{"class":"Customer","id":"c1","email":"ann@example.com"},"items":[{"className":"Product","objectId":"p1","price":9}]}]
        """

    @Test("import --graph prints the top-level count and the other models; find --include nests them")
    func importAndInclude() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let file = directory.child("orders.json")
        try Data(Self.file.utf8).write(to: URL(fileURLWithPath: file))

        let imported = try await CLI.run(["--db", db, "import", "Order", file, "--graph"])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.lines == ["imported 2"], "the line every import prints, alone on stdout (found by a black-box probe)")
        #expect(imported.stderr.split(separator: "\n") == ["  Address: 1", "  Customer: 1", "  Product: 2"])

        let found = try await CLI.run(["--db", db, "find", "Order", "--id", "o1", "--include", "customer"])
        #expect(found.status == 0, "\(found.stderr)")
        #expect(
            found.lines == [
                #"{"customer":{"address":"a1","email":"ann@example.com","name":"Ann","object":"c1"},"items":["p1","p2"],"object":"o1","total":30}"#
            ])
        let deep = try await CLI.run(["--db", db, "find", "Order", "--id", "o2", "--include", "customer.address,items"])
        let order = try JSONObject(parsing: deep.lines.first ?? "")
        #expect(order["customer"]?["address"]?["city"] == "Lyon")
        #expect(order["items"] == [["object": "p1", "name": "Lamp", "price": 9]])
        #expect(try await CLI.run(["--db", db, "find", "Order", "--id", "o1"]).lines.first?.contains(#""customer":"c1""#) == true)
    }

    @Test("bad graph input and bad --include: one line on stderr, a non-zero exit, the store unchanged")
    func errors() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let file = directory.child("orders.json")
        try Data(Self.file.utf8).write(to: URL(fileURLWithPath: file))
        #expect(try await CLI.run(["--db", db, "import", "Order", file, "--graph"]).status == 0)
        let bad = directory.child("bad.jsonl")
        try Data("{\"id\":\"o3\",\"customer\":{\"class\":\"Customer\",\"id\":\"c2\",\"n\":1}}\n42\n".utf8).write(to: URL(fileURLWithPath: bad))

        func expectFailure(_ result: CLI.Result, _ status: Int32, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.status == status, sourceLocation: sourceLocation)
            #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
            #expect(
                result.stderr.split(separator: "\n").count == 1 && result.stderr.contains(message), "\(result.stderr)", sourceLocation: sourceLocation
            )
        }
        expectFailure(try await CLI.run(["--db", db, "import", "Order", bad, "--graph"]), 1, "line 2 (item 2): expected a JSON object, got a number")
        expectFailure(try await CLI.run(["--db", db, "find", "Order", "--include", "customer"]), 64, "--include needs --id")
        expectFailure(try await CLI.run(["--db", db, "find", "Order", "--id", "o1", "--include", "customer", "--count"]), 64, "does not combine")
        expectFailure(
            try await CLI.run(["--db", db, "find", "Order", "--id", "o1", "--include", "customer,"]), 64, "--include takes association paths")
        expectFailure(
            try await CLI.run(["--db", db, "find", "Order", "--id", "o1", "--include", "total"]), 1,
            "'total' is not an association of Order (its associations: customer, items)")
        expectFailure(try await CLI.run(["--db", db, "find", "Order", "--id", "o9", "--include", "customer"]), 1, "no object 'o9' in Order")

        #expect(try await CLI.run(["--db", db, "find", "Customer", "--count"]).lines == ["1"])
        #expect(try await CLI.run(["--db", db, "find", "Order", "--count"]).lines == ["2"])
    }
}
