import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// The `--where` expression grammar: and, or, not, parentheses, in, exists, missing, quoted
/// values; each answer checked against the same question asked of the objects in Swift.
@Suite("satchel find --where: the expression grammar")
struct WhereGrammarCLITests {
    /// 60 products: brands of three kinds, prices, tags on some, a discount on some, names with
    /// spaces and keywords in them.
    static func products() -> [JSONObject] {
        let brands = ["Acme", "Globex", "Initech"]
        return (0..<60).map { i in
            var object: JSONObject = [
                "object": .string("p\(i)"), "brand": .string(brands[i % 3]), "price": .int(Int64(i * 7 % 50)),
                "name": .string(i % 10 == 0 ? "Acme or not \(i)" : "item \(i)"),
            ]
            if i % 4 == 0 { object["tags"] = .array([.string(i % 8 == 0 ? "sale" : "new"), "all"]) }
            if i % 5 == 0 { object["discount"] = .int(Int64(i % 3)) }
            return object
        }
    }

    @Test("and, or, not, parentheses, in, exists and missing answer what the same question asked in Swift answers")
    func expressions() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let file = directory.child("products.jsonl")
        let products = Self.products()
        try Data(products.map { String(decoding: $0.jsonBytes, as: UTF8.self) }.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: file))
        #expect(try await CLI.run(["--db", db, "import", "Product", file]).status == 0)
        #expect(try await CLI.run(["--db", db, "index", "Product", "brand,price"]).status == 0)

        func brand(_ o: JSONObject) -> String { o["brand"]?.stringValue ?? "" }
        func price(_ o: JSONObject) -> Int64 { o["price"]?.intValue ?? -1 }
        func tagged(_ o: JSONObject, _ tag: String) -> Bool { o["tags"]?.arrayValue?.contains(.string(tag)) ?? false }
        let cases: [([String], (JSONObject) -> Bool)] = [
            (["brand=Acme or price < 10"], { brand($0) == "Acme" || price($0) < 10 }),
            (["not brand=Acme"], { brand($0) != "Acme" }),
            (["brand=Acme and (price < 10 or tags ~= sale)"], { brand($0) == "Acme" && (price($0) < 10 || tagged($0, "sale")) }),
            (["brand=Acme and price < 10 or tags ~= sale"], { (brand($0) == "Acme" && price($0) < 10) || tagged($0, "sale") }),
            (["(brand=Acme or brand=Globex) and not price >= 25"], { (brand($0) == "Acme" || brand($0) == "Globex") && !(price($0) >= 25) }),
            (["not not brand == Initech"], { brand($0) == "Initech" }),
            (["discount exists"], { $0["discount"] != nil }),
            (["discount missing and tags exists"], { $0["discount"] == nil && $0["tags"] != nil }),
            (["brand in (Acme, Globex) and price>40"], { ["Acme", "Globex"].contains(brand($0)) && price($0) > 40 }),
            (["brand in Acme,Initech"], { ["Acme", "Initech"].contains(brand($0)) }),
            (["name ^= \"Acme or not\""], { $0["name"]?.stringValue?.hasPrefix("Acme or not") ?? false }),
            (["name=\"Acme or not 20\""], { $0["name"] == "Acme or not 20" }),
            (["brand=Acme", "price<=14 or discount=0"], { brand($0) == "Acme" && (price($0) <= 14 || $0["discount"] == 0) }),
            (["tags=[\"sale\",\"all\"]"], { $0["tags"] == ["sale", "all"] }),
        ]
        for (expressions, matches) in cases {
            let expected = products.filter(matches).compactMap { $0["object"]?.stringValue }.sorted()
            #expect(!expected.isEmpty && expected.count < products.count, "\(expressions) asks a question that can fail")
            let result = try await CLI.run(["--db", db, "find", "Product", "--select", "brand"] + expressions.flatMap { ["--where", $0] })
            #expect(result.status == 0, "\(expressions): \(result.stderr)")
            let ids = try result.lines.map { try #require(try JSONObject(parsing: $0)["object"]?.stringValue) }.sorted()
            #expect(ids == expected, "\(expressions)")
        }
    }

    @Test("items[].product: a path into an order's lines, matched by any line, indexed element by element")
    func arrayPaths() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let orders = [
            #"{"object":"o1","items":[{"product":"prod-0026","qty":1},{"product":"prod-0003"}]}"#,
            #"{"object":"o2","items":[{"product":"prod-0003","qty":2}]}"#, #"{"object":"o3","items":[],"note":"empty"}"#,
        ]
        for order in orders { #expect(try await CLI.run(["--db", db, "put", "Order", order]).status == 0) }
        func ids(_ arguments: [String]) async throws -> [String] {
            let result = try await CLI.run(["--db", db, "find", "Order"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return try result.lines.map { try #require(try JSONObject(parsing: $0)["object"]?.stringValue) }
        }
        #expect(try await ids(["--where", "items[].product=prod-0026"]) == ["o1"])
        #expect(try await ids(["--where", "items[].product=prod-0003 and items[].qty >= 2"]) == ["o2"])
        #expect(try await ids(["--where", "items[].product missing"]) == ["o3"])
        let index = try await CLI.run(["--db", db, "index", "Order", "items[].product"])
        #expect(index.status == 0 && index.lines.first?.contains("items[].product") == true, "\(index.lines) \(index.stderr)")
        let plan = try await CLI.run(["--db", db, "find", "Order", "--where", "items[].product=prod-0003", "--explain"])
        #expect(plan.lines.first?.hasPrefix("index items[].product") == true, "\(plan.lines)")
        #expect(try await ids(["--where", "items[].product=prod-0003"]) == ["o1", "o2"])
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
        // Without [], the path meets the array: one line saying what to write, not an empty answer.
        let dotted = try await CLI.run(["--db", db, "find", "Order", "--where", "items.product=prod-0026"])
        #expect(dotted.status != 0 && dotted.stdout.isEmpty, "\(dotted.stdout)")
        #expect(dotted.stderr.split(separator: "\n").count == 1 && dotted.stderr.contains("items[].product"), "\(dotted.stderr)")
    }

    @Test("satchel aggregate: one sorted JSON line per group, results under count, sum(ATTR)…; --explain; mistakes are usage errors")
    func aggregate() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for json in [
            #"{"object":"a","brand":"Acme","price":10}"#, #"{"object":"b","brand":"Acme","price":2.5}"#,
            #"{"object":"c","brand":"Globex","price":"x"}"#, #"{"object":"d","price":7}"#,
        ] {
            #expect(try await CLI.run(["--db", db, "put", "P", json]).status == 0)
        }
        let grouped = try await CLI.run([
            "--db", db, "aggregate", "P", "--group-by", "brand", "--count", "--sum", "price", "--min", "price", "--max", "price", "--avg", "price",
        ])
        #expect(
            grouped.lines == [
                #"{"avg(price)":7.0,"brand":null,"count":1,"max(price)":7,"min(price)":7,"sum(price)":7}"#,
                #"{"avg(price)":6.25,"brand":"Acme","count":2,"max(price)":10,"min(price)":2.5,"sum(price)":12.5}"#,
                #"{"avg(price)":null,"brand":"Globex","count":1,"max(price)":"x","min(price)":"x","sum(price)":null}"#,
            ], "\(grouped.lines) \(grouped.stderr)")
        let filtered = try await CLI.run(["--db", db, "aggregate", "P", "--where", "brand=Acme or brand missing", "--count", "--sum", "price"])
        #expect(filtered.lines == [#"{"count":3,"sum(price)":19.5}"#])
        #expect(
            try await CLI.run(["--db", db, "aggregate", "P", "--count", "--explain"]).lines == ["count from the model's statistics (nothing read)"])
        #expect(try await CLI.run(["--db", db, "index", "P", "brand"]).status == 0)
        let walk = try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "brand", "--count", "--explain"])
        #expect(walk.lines.first?.hasPrefix("group by brand: one walk of index brand") == true, "\(walk.lines)")
        #expect(
            try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "brand", "--count"]).lines == [
                #"{"brand":null,"count":1}"#, #"{"brand":"Acme","count":2}"#, #"{"brand":"Globex","count":1}"#,
            ])
        let none = try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "brand"])
        #expect(none.status == 64 && none.stderr.contains("name at least one of --count"), "\(none.stderr)")
        let missing = try await CLI.run(["--db", db, "aggregate", "Q", "--count"])
        #expect(missing.status == 1 && missing.stderr.contains("no model named 'Q'"), "\(missing.stderr)")
    }

    @Test("index --text and find --match: matches best first, with --where, --limit and --select; explain; mistakes")
    func textSearch() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for json in [
            #"{"object":"n1","title":"Brass reading lamp","body":"A warm light for reading, reading in bed"}"#,
            #"{"object":"n2","title":"Café au lait","body":"Le CAFÉ du matin, reading the news"}"#,
            #"{"object":"n3","title":"東京 travel","body":"東京タワー and a lamp","archived":true}"#,
        ] {
            #expect(try await CLI.run(["--db", db, "put", "Note", json]).status == 0)
        }
        let noIndex = try await CLI.run(["--db", db, "find", "Note", "--match", "lamp"])
        // Exit 1: 2 is --require-index's (a black-box probe).
        #expect(noIndex.status == 1 && noIndex.stderr.contains("--text"), "\(noIndex.stderr)")
        let index = try await CLI.run(["--db", db, "index", "Note", "--text", "title,body"])
        #expect(index.status == 0 && index.lines.first?.contains("text(title,body)") == true, "\(index.lines) \(index.stderr)")
        func ids(_ arguments: [String]) async throws -> [String] {
            let result = try await CLI.run(["--db", db, "find", "Note"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return try result.lines.map { try #require(try JSONObject(parsing: $0)["object"]?.stringValue) }
        }
        #expect(try await ids(["--match", "reading"]) == ["n1", "n2"], "n1 says it twice")
        #expect(try await ids(["--match", "cafe"]) == ["n2"], "case and diacritics folded")
        #expect(try await ids(["--match", #""reading lamp""#]) == ["n1"])
        #expect(try await ids(["--match", "lam*", "--where", "archived missing"]) == ["n1"])
        #expect(try await ids(["--match", "東京"]) == ["n3"])
        #expect(try await ids(["--match", "reading", "--limit", "1"]) == ["n1"])
        let selected = try await CLI.run(["--db", db, "find", "Note", "--match", "cafe", "--select", "title"])
        #expect(selected.lines == [#"{"object":"n2","title":"Café au lait"}"#])
        let explained = try await CLI.run(["--db", db, "find", "Note", "--match", #"lamp "reading light" br*"#, "--explain"])
        #expect(explained.lines == [#"text index text(title,body): lamp AND "reading light" AND br*, ranked by BM25"#])
        let unclosed = try await CLI.run(["--db", db, "find", "Note", "--match", #""reading lamp"#])
        #expect(unclosed.status == 64 && unclosed.stderr.contains("never closes"), "a usage error: \(unclosed.stderr)")
        #expect(try await ids(["--match", "lamp", "--order", "title:desc"]) == ["n3", "n1"], "--order instead of the rank")
        // A text search never scans: --require-index holds; --explain says the filter and the order (found by a black-box probe).
        #expect(try await ids(["--match", "lamp", "--require-index"]) == ["n1", "n3"])
        let filtered = try await CLI.run([
            "--db", db, "find", "Note", "--match", "lamp", "--where", "archived missing", "--order", "title:desc", "--explain",
        ])
        #expect(
            filtered.lines == [
                #"text index text(title,body): lamp, ranked by BM25; filter archived missing; sort by title desc instead of the rank"#
            ],
            "\(filtered.stdout)\(filtered.stderr)")
        let withID = try await CLI.run(["--db", db, "find", "Note", "--match", "lamp", "--id", "n1"])
        #expect(withID.status == 64 && withID.stderr.contains("--match searches the text index"), "\(withID.stderr)")
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
    }

    @Test("a mistake is one line naming its column, exit 64, and nothing printed")
    func mistakes() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        #expect(try await CLI.run(["--db", db, "put", "Product", #"{"object":"p1","brand":"Acme"}"#]).status == 0)
        let mistakes: [(String, String)] = [
            ("brand=Acme and", "column 15: expected an attribute, found the end"),
            ("(brand=Acme or price<3", "column 23: expected ')' to close the '(' at column 1"),
            ("brand=Acme Corp", "column 12: expected 'and', 'or' or the end, found 'Corp' (write a value holding spaces in double quotes"),
            ("brand=or", "column 7: 'or' is a keyword"),
            ("brand Acme", "column 7: expected an operator after 'brand'"),
            ("and brand=Acme", "column 1: expected an attribute, found 'and'"),
            ("brand=\"Acme", "column 7: a quoted value that is never closed"),
            ("brand ! Acme", "column 7: '!' is not an operator"),
            ("tags=[1,2", "column 6: a '[' that is never closed"),
            ("brand in (Acme Globex)", "column 16: expected ',' or ')' in the list, found 'Globex'"),
            ("", "column 1: an empty condition"),
        ]
        for (expression, says) in mistakes {
            let result = try await CLI.run(["--db", db, "find", "Product", "--where", expression])
            #expect(result.status == 64 && result.stdout.isEmpty, "\(expression): \(result.status) \(result.stdout)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.contains(says) == true, "\(expression): \(result.stderr)")
        }
    }

    @Test(
        "a range with an object bound orders objects as --order does, with and without an index; a prefix of another type on a path the model's arrays cross is refused like any operand (found by a black-box probe: never matched; answered)"
    )
    func objectRangesAndArrayCrossings() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let values = [#"{"k":1}"#, #"{"k":5}"#, #"{"k":5,"z":0}"#, "[5]", "3", #""s""#, #"{}"#]
        for (i, value) in values.enumerated() {
            #expect(try await CLI.run(["--db", db, "put", "V", #"{"object":"v\#(i)","v":\#(value)}"#]).status == 0)
        }
        func ids(_ expression: String) async throws -> [String] {
            let result = try await CLI.run(["--db", db, "find", "V", "--where", expression, "--order", "object"])
            #expect(result.status == 0, "\(expression): \(result.stderr)")
            return try result.lines.map { try #require(try JSONObject(parsing: $0)["object"]?.stringValue) }
        }
        let ordered = try await CLI.run(["--db", db, "find", "V", "--where", #"v >= {}"#, "--order", "v"]).lines.map {
            try #require(try JSONObject(parsing: $0)["object"]?.stringValue)
        }
        #expect(ordered == ["v6", "v0", "v1", "v2"], "every object, in --order's order")
        for indexed in [false, true] {
            if indexed { #expect(try await CLI.run(["--db", db, "index", "V", "v"]).status == 0) }
            #expect(try await ids(#"v > {"k":2}"#) == ["v1", "v2"], "indexed: \(indexed)")
            #expect(try await ids(#"v < {"k":5}"#) == ["v0", "v6"], "indexed: \(indexed)")
            #expect(try await ids(#"v > [2]"#) == ["v3"], "indexed: \(indexed)")
        }
        #expect(try await CLI.run(["--db", db, "put", "O", #"{"object":"o1","items":[{"product":"p1"}]}"#]).status == 0)
        #expect(try await CLI.run(["--db", db, "put", "O", #"{"object":"o2","items":{"product":"p2"}}"#]).status == 0)
        for expression in ["items.product ^= 1", "not items.product ^= 1", "items.product ^= true or items.product = p2"] {
            let result = try await CLI.run(["--db", db, "find", "O", "--where", expression])
            #expect(result.status == 1 && result.stderr.contains("items[].product") && result.stdout.isEmpty, "\(expression): \(result.stderr)")
        }
        #expect(
            try await CLI.run(["--db", db, "find", "V", "--where", "v ^= 1", "--count"]).stdout == "0\n", "still nothing on a path no array crosses")
        // An aggregate function's path is refused as a condition's (a black-box probe: sum(items.qty)
        // answered null), with and without an index on it, and a deeper one on the object read.
        #expect(try await CLI.run(["--db", db, "put", "O", #"{"object":"o3","items":[{"qty":4}],"deep":{"a":[{"b":1}]}}"#]).status == 0)
        for indexed in [false, true] {
            if indexed { #expect(try await CLI.run(["--db", db, "index", "O", "items.qty"]).status == 0) }
            for function in ["--sum", "--avg", "--min", "--max"] {
                let result = try await CLI.run(["--db", db, "aggregate", "O", function, "items.qty"])
                #expect(
                    result.status == 1 && result.stderr.contains("items[].qty") && result.stdout.isEmpty,
                    "\(function), indexed: \(indexed): \(result.stdout)\(result.stderr)")
            }
        }
        let deep = try await CLI.run(["--db", db, "aggregate", "O", "--sum", "deep.a.b"])
        #expect(deep.status == 1 && deep.stderr.contains("deep.a[].b") && deep.stdout.isEmpty, "\(deep.stdout)\(deep.stderr)")
        #expect(try await CLI.run(["--db", db, "aggregate", "O", "--sum", "items[].qty"]).lines == [#"{"sum(items[].qty)":4}"#])
    }

    @Test(
        "an attribute whose name holds a dot, a space, an operator or is a keyword is named in double quotes, as one name, by --where, --order, --select, index and aggregate; answers match a scan (found by a black-box probe)"
    )
    func quotedNames() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let names = ["a.b", "unit price", "in", "not", "x=y", "c,d"]
        for i in 0..<12 {
            var object: JSONObject = ["object": .string("w\(i)"), "a": ["b": .int(Int64(100 + i))]]
            for (k, name) in names.enumerated() { object[name] = .int(Int64((i + k) % 4)) }
            #expect(try await CLI.run(["--db", db, "put", "W", String(decoding: object.jsonBytes, as: UTF8.self)]).status == 0)
        }
        func quoted(_ name: String) -> String { String(decoding: JSONValue.string(name).jsonBytes, as: UTF8.self) }
        func ids(_ arguments: [String]) async throws -> [String] {
            let result = try await CLI.run(["--db", db, "find", "W"] + arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return try result.lines.map { try #require(try JSONObject(parsing: $0)["object"]?.stringValue) }
        }
        for (k, name) in names.enumerated() {
            let expected = (0..<12).filter { ($0 + k) % 4 == 2 }.map { "w\($0)" }.sorted()
            // Scanned, then through an index on the name.
            #expect(try await ids(["--where", "\(quoted(name))=2"]).sorted() == expected, "\(name)")
            #expect(try await ids(["--where", "\(quoted(name)) in (2)", "--order", "\(quoted(name)):desc"]).sorted() == expected, "\(name)")
            let index = try await CLI.run(["--db", db, "index", "W", quoted(name)])
            #expect(index.status == 0, "\(name): \(index.stderr)")
            let explained = try await CLI.run(["--db", db, "find", "W", "--where", "\(quoted(name))=2", "--require-index"])
            #expect(explained.status == 0, "\(name): \(explained.stderr)")
            #expect(try await ids(["--where", "\(quoted(name))=2"]).sorted() == expected, "\(name), indexed")
            let selected = try await CLI.run(["--db", db, "find", "W", "--id", "w2", "--select", quoted(name)])
            var expectedLine: JSONObject = ["object": "w2"]
            expectedLine[name] = .int(Int64((2 + k) % 4))
            #expect(try selected.lines.map { try JSONObject(parsing: $0) } == [expectedLine], "\(name): \(selected.stdout)\(selected.stderr)")
            let summed = try await CLI.run(["--db", db, "aggregate", "W", "--sum", quoted(name)])
            let sum = (0..<12).map { Int64(($0 + k) % 4) }.reduce(0, +)
            #expect(try summed.lines.map { try JSONObject(parsing: $0)["sum(\(name))"] } == [.int(sum)], "\(name): \(summed.stdout)\(summed.stderr)")
        }
        // Unquoted, a dot is still a path.
        #expect(try await ids(["--where", "a.b=105"]) == ["w5"])
        // The name and the path print alike: aggregated together, they are refused, not merged.
        for clash in [["--sum", quoted("a.b"), "--sum", "a.b"], ["--count", "--group-by", quoted("a.b"), "--group-by", "a.b"]] {
            let result = try await CLI.run(["--db", db, "aggregate", "W"] + clash)
            #expect(result.status == 64 && result.stderr.contains("one name"), "\(clash): \(result.stdout)\(result.stderr)")
        }
        #expect(try await CLI.run(["--db", db, "aggregate", "W", "--sum", "a.b"]).lines == [#"{"sum(a.b)":\#((100..<112).reduce(0, +))}"#])
        // A quoted name that is not a JSON string, or is empty, is a usage error.
        for wrong in [#"--where="a=1"#, #"--where="" = 1"#, #"--order="a"#] {
            let result = try await CLI.run(["--db", db, "find", "W", wrong])
            #expect(result.status == 64 && result.stderr.split(separator: "\n").count == 1, "\(wrong): \(result.stderr)")
        }
        // A keyword where an attribute goes says how to name one so.
        let keyword = try await CLI.run(["--db", db, "find", "W", "--where", "in=2"])
        #expect(keyword.status == 64 && keyword.stderr.contains(#""in""#), "\(keyword.stderr)")
        // A name ending in [] is refused wherever a path goes: a path reads it as an array's
        // elements (a black-box probe: `"i[]"=2` asked of the elements of `i`, and answered).
        #expect(try await CLI.run(["--db", db, "put", "W", #"{"object":"w1","i[]":2,"i":[2,6]}"#]).status == 0)
        let brackets = [
            ["find", "W", "--where", #""i[]"=2"#], ["find", "W", "--select", #""i[]""#], ["find", "W", "--order", #""i[]""#],
            ["index", "W", #""i[]""#], ["aggregate", "W", "--sum", #""i[]""#], ["aggregate", "W", "--count", "--group-by", #""i[]""#],
            // `"[]"` ends in [] too, as a migration's steps read it (a black-box probe: the options took it as a name).
            ["find", "W", "--where", #""[]"=2"#], ["find", "W", "--select", #""[]""#], ["index", "W", #""[]""#],
            ["aggregate", "W", "--sum", #""[]""#],
        ]
        for command in brackets {
            let result = try await CLI.run(["--db", db] + command)
            #expect(
                result.status == 64 && result.stderr.contains("ends in []") && result.stdout.isEmpty, "\(command): \(result.stdout)\(result.stderr)")
        }
        // The id is a string: a path below it asks nothing (a black-box probe: `object[]=w1`
        // answered nothing, in silence).
        for command in [
            ["find", "W", "--where", "object[]=w1"], ["find", "W", "--where", "object.x=1"], ["find", "W", "--order", "object.x"],
            ["index", "W", "object[]"], ["index", "W", "--elements", "object"],
        ] {
            let result = try await CLI.run(["--db", db] + command)
            #expect(result.status == 64 && result.stderr.contains("the object's id") && result.stdout.isEmpty, "\(command): \(result.stderr)")
        }
    }
}
