import Foundation
import Satchel
import SatchelTestSupport
import Testing

/// A wrong question never gets a silent or wrong answer: each mistake as a user types it, its
/// exit code (64, ArgumentParser's, for usage errors; 1 for the others), and its one line.
@Suite("satchel: mistakes as typed")
struct MistakeTests {
    /// A store with two products and the models Product, Order and Customer.
    struct Shop {
        let directory = TemporaryDirectory()
        var db: String { directory.child("db") }

        init() async throws {
            for (model, json) in [
                ("Product", #"{"object":"p1","name":"Lamp","brand":"Acme","price":10}"#),
                ("Product", #"{"object":"p2","name":"Kettle","brand":"","price":200}"#),
                ("Order", #"{"object":"o1","total":3}"#), ("Customer", #"{"object":"c1","name":"Ann"}"#),
            ] {
                let put = try await CLI.run(["--db", db, "put", model, json])
                guard put.status == 0 else { throw CLI.Failure("put failed: \(put.stderr)") }
            }
        }

        func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> CLI.Result {
            try await CLI.run(["--db", db] + arguments, environment: environment)
        }
    }

    /// The result is a failure with `status` and exactly one line on stderr holding `text`.
    static func expectFailure(_ result: CLI.Result, _ status: Int32, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == status, "exit \(result.status): \(result.stderr)", sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one line on stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr) says '\(text)'", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "nothing on stdout: \(result.stdout)", sourceLocation: sourceLocation)
    }

    @Test(
        "a model name holding a line break is shown escaped: stats keeps one line per model, and an error tells it from a name with a space (found by a black-box probe)"
    )
    func controlCharactersInNames() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("s")
        for model in ["A\nB", "A B", #""A\nB""#, "x', 'y"] { #expect(try await CLI.run(["--db", db, "put", model, #"{"n":1}"#]).status == 0) }
        let stats = try await CLI.run(["--db", db, "stats"])
        #expect(stats.status == 0 && stats.lines.count == 4, "\(stats.stdout)")
        for shown in [#""A\nB""#, "A B", #""\"A\\nB\"""#, #""x', 'y""#] {
            #expect(stats.lines.contains { $0.hasPrefix(shown + ": partition=user") }, "\(shown) in \(stats.stdout)")
        }
        let missing = try await CLI.run(["--db", db, "find", "Nope"])
        Self.expectFailure(missing, 1, #"'"A\nB"'"#)
        #expect(missing.stderr.contains(#"'"x', 'y"'"#) && missing.stderr.contains(#"'"\"A\\nB\""'"#), "\(missing.stderr)")
    }

    @Test(
        "exit codes agree (found by a black-box probe): --batch-size 0 is a usage error (64); a file migrate cannot read is an io error (1), as import's is"
    )
    func exitCodesAgree() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("s")
        #expect(try await CLI.run(["--db", db, "put", "M", #"{"object":"a","n":1}"#]).status == 0)
        let file = directory.child("m.jsonl")
        try #"{"object":"b","n":2}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let zero = try await CLI.run(["--db", db, "import", "M", file, "--batch-size", "0"])
        #expect(zero.status == 64 && zero.stderr.contains("--batch-size"), "\(zero.stderr)")
        let missing = directory.child("missing.json")
        let migrate = try await CLI.run(["--db", db, "migrate", "M", missing])
        let load = try await CLI.run(["--db", db, "import", "M", missing])
        #expect(migrate.status == 1 && load.status == 1, "\(migrate.stderr)\(load.stderr)")
        #expect(migrate.stderr.filter { $0 == "\n" }.count == 1 && migrate.stderr.contains("missing.json"))
        #expect(try await CLI.run(["--db", db, "find", "M", "--count"]).lines == ["1"])
    }

    @Test(
        "an argument whose bytes are not UTF-8 is a usage error, not a value with U+FFFD in it (found by a black-box probe: two model names became one)"
    )
    func argumentNotUTF8() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("s")
        for command in [#"put "M$(printf '\377')" '{"a":1}'"#, #"put M "{\"a\":\"$(printf '\376')\"}""#] {
            let run = try await ChildProcess.detached("/bin/sh", ["-c", "\"$0\" --db \"$1\" \(command)", CLI.executable.path, db])
            let stderr = String(decoding: run.stderr, as: UTF8.self)
            #expect(run.status == 64 && stderr.contains("is not valid UTF-8") && stderr.filter { $0 == "\n" }.count == 1, "\(command): \(stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: db), "no store was made")
    }

    @Test(
        "a command whose stdout cannot be written (closed: >&-) fails with one line, and what it prints lands in no file of the store (found by a black-box probe: exit 0, an export written into the LevelDB LOCK file)"
    )
    func closedStandardOutput() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("s")
        let big = String(repeating: "y", count: 100_000)
        #expect(try await CLI.run(["--db", db, "put", "M", #"{"object":"a","x":"\#(big)"}"#]).status == 0)
        let before = try await CLI.run(["--db", db, "export", "M"]).stdout
        // Help and the version too (a black-box probe: help into a full disk exited 0).
        for command in ["export M", "find M", "find M --count", "stats", "help find", "find --help", "--version"] {
            let run = try await ChildProcess.detached("/bin/sh", ["-c", "\"$0\" --db \"$1\" \(command) >&-", CLI.executable.path, db])
            let stderr = String(decoding: run.stderr, as: UTF8.self)
            #expect(
                run.status == 1 && stderr.hasPrefix("satchel: cannot write to standard output") && stderr.filter { $0 == "\n" }.count == 1,
                "\(command): \(stderr)")
            #expect(FileManager.default.contents(atPath: db + "/user/LOCK")?.isEmpty == true, "\(command)")
        }
        #expect(try await CLI.run(["--db", db, "export", "M"]).stdout == before)
        #expect(try await CLI.run(["--db", db, "check"]).status == 0)
        // A write whose output is lost says that the write stays made: a script that retries a
        // put without an id would make a second object (a black-box probe: only "cannot write").
        let put = try await ChildProcess.detached("/bin/sh", ["-c", "\"$0\" --db \"$1\" put M '{\"y\":1}' >&-", CLI.executable.path, db])
        let said = String(decoding: put.stderr, as: UTF8.self)
        #expect(put.status == 1 && said.contains("cannot write to standard output") && said.contains("stays"), "\(said)")
        #expect(try await CLI.run(["--db", db, "find", "M", "--where", "y=1", "--count"]).lines == ["1"])
    }

    @Test("--id of a missing object with --count prints 0 and exits 0; without --count it is one line and exit 1 (a black-box probe: 0 and exit 1)")
    func missingIDCounted() async throws {
        let shop = try await Shop()
        let counted = try await shop.run(["find", "Product", "--id", "nope", "--count"])
        #expect(counted.status == 0 && counted.lines == ["0"] && counted.stderr.isEmpty, "\(counted.status) \(counted.stderr)")
        #expect(try await shop.run(["find", "Product", "--id", "p1", "--count"]).lines == ["1"])
        Self.expectFailure(try await shop.run(["find", "Product", "--id", "nope"]), 1, "no object 'nope' in Product")
    }

    @Test("no command, with or without --db, is a usage error in one line (a black-box probe: the whole help and exit 0)")
    func noCommand() async throws {
        let shop = try await Shop()
        Self.expectFailure(try await shop.run([]), 64, "no command given")
        Self.expectFailure(try await CLI.run([]), 64, "no command given")
        Self.expectFailure(try await CLI.run(["--db=\(shop.db)"]), 64, "no command given")
        let help = try await CLI.run(["--help"])
        #expect(help.status == 0 && help.stdout.contains("find"))
    }

    @Test("--where: == is equality; a value starting with an operator, or empty and unquoted, is a usage error naming its column")
    func whereMistakes() async throws {
        let shop = try await Shop()
        let doubled = try await shop.run(["find", "Product", "--where", "brand == Acme"])
        #expect(doubled.status == 0 && doubled.lines == [#"{"brand":"Acme","name":"Lamp","object":"p1","price":10}"#])
        Self.expectFailure(try await shop.run(["find", "Product", "--where", "price<<100"]), 64, "column 7: expected a value after '<', found '<'")
        Self.expectFailure(try await shop.run(["find", "Product", "--where", "brand= =Acme"]), 64, "column 8: expected a value after '=', found '='")
        Self.expectFailure(
            try await shop.run(["find", "Product", "--where", "brand="]), 64, #"column 7: expected a value after '=' (write "" for the empty string)"#
        )
        Self.expectFailure(try await shop.run(["find", "Product", "--where", "brand in Acme,,Hooli"]), 64, "column 15: expected a value after ','")
        let quoted = try await shop.run(["find", "Product", "--where", #"brand="""#])
        #expect(quoted.status == 0 && quoted.lines.count == 1 && quoted.lines.first?.contains(#""object":"p2""#) == true)
        let operatorInJSON = try await shop.run(["find", "Product", "--where", #"name="<b>""#, "--count"])
        #expect(operatorInJSON.status == 0 && operatorInJSON.lines == ["0"])
    }

    @Test("plain http:// to another host is refused in one line pointing at --insecure, for every backend; the store is as it was")
    func insecureTransport() async throws {
        let shop = try await Shop()
        let before = try await shop.run(["export", "Product"]).stdout
        let attempts: [[String]] = [
            ["--backend", "rhoconnect", "--url", "http://192.0.2.1:9292/", "--user", "u", "--password", "p"],
            ["--backend", "kinto", "--url", "http://192.0.2.1:8888/v1", "--bucket", "b", "--user", "u", "--password", "p"],
            ["--backend", "parse", "--url", "http://192.0.2.1:1337/parse", "--app-id", "a", "--user", "u", "--password", "p"],
            ["--backend", "salesforce", "--url", "http://192.0.2.1", "--token", "t"],
        ]
        for backend in attempts {
            Self.expectFailure(try await shop.run(["sync"] + backend + ["--model", "Product"]), 1, "refusing plain http:// to 192.0.2.1")
            Self.expectFailure(try await shop.run(["sync"] + backend + ["--model", "Product"]), 1, "--insecure")
        }
        #expect(try await shop.run(["export", "Product"]).stdout == before)
    }

    @Test(
        "an option of another backend (--bucket, --app-id, --rest-key, --create-protection) is a usage error, as --token's is, and sync --model '' is refused (found by a black-box probe: ignored in silence; an empty source name was sent)"
    )
    func optionsOfAnotherBackend() async throws {
        let shop = try await Shop()
        let before = try await shop.run(["export", "Product"]).stdout
        let rhoconnect = ["sync", "--backend", "rhoconnect", "--url", "http://127.0.0.1:9/", "--user", "u", "--password", "p"]
        for (extra, words) in [
            (["--bucket", "b"], "--bucket goes with --backend kinto"), (["--app-id", "a"], "--app-id goes with --backend parse"),
            (["--rest-key", "k"], "--rest-key goes with --backend parse"),
            (["--create-protection", "none"], "--create-protection goes with --backend parse"),
        ] {
            Self.expectFailure(try await shop.run(rhoconnect + extra), 64, words)
        }
        Self.expectFailure(try await shop.run(rhoconnect + ["--model", ""]), 64, "--model")
        #expect(try await shop.run(["export", "Product"]).stdout == before)
    }

    @Test("a model the store has never seen is an error naming its models, nearest first; index makes no model")
    func unknownModels() async throws {
        let shop = try await Shop()
        Self.expectFailure(try await shop.run(["find", "Nosuch"]), 1, "no model named 'Nosuch': the store has ")
        let wrongCase = try await shop.run(["find", "product"])
        Self.expectFailure(wrongCase, 1, "no model named 'product': the store has 'Product', ")
        Self.expectFailure(try await shop.run(["find", "Prodcut", "--count"]), 1, "the store has 'Product',")
        Self.expectFailure(try await shop.run(["index", "Nosuch", "a"]), 1, "no model named 'Nosuch'")
        Self.expectFailure(try await shop.run(["index", "Nosuch", "--list"]), 1, "no model named 'Nosuch'")
        Self.expectFailure(try await shop.run(["errors", "Nosuch"]), 1, "no model named 'Nosuch'")
        let models = try await shop.run(["stats", "--json"]).lines.compactMap { try? JSONObject(parsing: $0)["model"]?.stringValue }
        #expect(models.sorted() == ["Customer", "Order", "Product"], "index created no model")
    }

    @Test("--order takes ATTR, ATTR:asc or ATTR:desc only")
    func orderSuffix() async throws {
        let shop = try await Shop()
        Self.expectFailure(
            try await shop.run(["find", "Product", "--order", "price:up"]), 64, "--order takes ATTR, ATTR:asc or ATTR:desc, not 'price:up'")
        Self.expectFailure(try await shop.run(["find", "Product", "--order", ":desc"]), 64, "--order needs an attribute")
        Self.expectFailure(try await shop.run(["find", "Product", "--order", "price:desc:asc"]), 64, "--order takes one direction")
        #expect(
            try await shop.run(["find", "Product", "--order", "price:desc", "--select", "price"]).lines == [
                #"{"object":"p2","price":200}"#, #"{"object":"p1","price":10}"#,
            ])
    }

    @Test("an id written as a number in --where is that text; --offset past an --id says so; index option mistakes are usage errors (probes)")
    func smallerMistakes() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        for id in ["12345", "true", "7"] { #expect(try await CLI.run(["--db", db, "put", "P", #"{"object":"\#(id)","a":1}"#]).status == 0) }
        for (condition, expected) in [("object=12345", ["12345"]), ("object=true", ["true"]), ("object in 7,12345", ["12345", "7"])] {
            let found = try await CLI.run(["--db", db, "find", "P", "--where", condition, "--select", "object"])
            let ids = found.lines.map { (try? JSONObject(parsing: $0))?["object"]?.stringValue ?? "" }.sorted()
            #expect(found.status == 0 && ids == expected, "\(condition): \(found)")
        }
        Self.expectFailure(try await CLI.run(["--db", db, "find", "P", "--id", "7", "--offset", "1"]), 1, "skipped by --offset 1")
        Self.expectFailure(try await CLI.run(["--db", db, "index", "P", "--text", "a", "--elements"]), 64, "does not combine")
        // An empty full-text query is a usage error, as other empty options are (found by a
        // black-box probe: it exited 1).
        Self.expectFailure(try await CLI.run(["--db", db, "find", "P", "--match", " "]), 64, "--match needs")
        // So is one that does not parse, before any store is read (a black-box probe: it exited 1).
        Self.expectFailure(try await CLI.run(["--db", db, "find", "P", "--match", "!!!"]), 64, "has no word to look for")
        Self.expectFailure(try await CLI.run(["--db", db, "find", "P", "--match", #"lamp "unclosed"#]), 64, "never closes")
        // A group attribute named as a result would share its key on each line (found by a
        // black-box probe: --group-by count --count printed one of the two).
        Self.expectFailure(try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "count", "--count"]), 64, "has the name of a result")
        Self.expectFailure(try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "sum(a)", "--sum", "a"]), 64, "has the name of a result")
        Self.expectFailure(try await CLI.run(["--db", db, "aggregate", "P", "--group-by", "a", "--group-by", "a", "--count"]), 64, "twice")
        // A newline in a --where keeps the reason of its refusal (found by a black-box probe).
        Self.expectFailure(try await CLI.run(["--db", db, "find", "P", "--where", "a=1\nor x"]), 64, "expected an operator")
        // A position in an array is no path (found by a black-box probe: it read an attribute
        // named items[0], and answered nothing).
        for arguments in [
            ["find", "P", "--where", "items[0].product=p1"], ["find", "P", "--where", "n[0]=1"], ["aggregate", "P", "--sum", "n[1]"],
        ] {
            Self.expectFailure(try await CLI.run(["--db", db] + arguments), 64, "takes no position in an array")
        }
    }

    @Test("conditions nested deeper than the parser takes are one usage error, not a crash (a black-box probe: 35,000 parentheses crashed)")
    func deeplyNestedCondition() async throws {
        let shop = try await Shop()
        // (One argument holds at most 128 KiB.)
        for depth in [200, 40_000] {
            let parentheses = String(repeating: "(", count: depth) + "price=10" + String(repeating: ")", count: depth)
            let nots = String(repeating: "not ", count: depth / 2) + "price=10"
            for condition in [parentheses, nots] {
                for arguments in [["find", "Product", "--where", condition], ["aggregate", "Product", "--count", "--where", condition]] {
                    let result = try await shop.run(arguments)
                    if depth == 200 {
                        #expect(result.status == 0, "\(result.stderr.prefix(300))")
                    } else {
                        Self.expectFailure(result, 64, "nested deeper than 200 levels")
                    }
                }
            }
        }
    }

    @Test("a path with an empty name, or [] inside a name, is a usage error wherever a path goes, never an empty answer (found by a black-box probe)")
    func malformedPaths() async throws {
        let shop = try await Shop()
        // One letter after the [] as well (a black-box probe: items[]q was taken as a name).
        for path in ["a..b", ".price", "price.", "items[]product", "items.[].product", "items[]q", "a[]]", "items[]p.x", "a[][]"] {
            for arguments in [
                ["find", "Product", "--where", "\(path)=1"], ["find", "Product", "--select", "name,\(path)"], ["find", "Product", "--order", path],
                ["aggregate", "Product", "--sum", path], ["aggregate", "Product", "--count", "--group-by", path], ["index", "Product", path],
            ] {
                Self.expectFailure(try await shop.run(arguments), 64, "'\(path)'")
            }
        }
        // An empty name in a list of them: --select, index, index --text (found by a black-box probe).
        for arguments in [
            ["find", "Product", "--select", ""], ["find", "Product", "--select", "name,,price"], ["index", "Product", ""],
            ["index", "Product", "brand,"],
            ["index", "Product", "--text", ",name"],
        ] {
            let result = try await shop.run(arguments)
            #expect(result.status == 64 && result.stdout.isEmpty, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("empty name"), "\(arguments): \(result.stderr)")
        }
        #expect(try await shop.run(["index", "Product", "--list"]).stdout.isEmpty, "no index was made")
        // A migration's steps refuse them too, writing nothing (found by a black-box probe: an
        // index a..b was made, which no command could drop, and a rename through items[]product
        // was recorded as applied).
        let before = try await shop.run(["export", "Product"]).stdout
        for (n, step) in [#"{"createIndex":"a..b"}"#, #"{"rename":"items[]product","to":"y"}"#, #"{"remove":"lines[0].qty"}"#].enumerated() {
            let file = shop.directory.child("bad-\(n).json")
            try #"{"name":"bad-\#(n)","steps":[\#(step)]}"#.write(toFile: file, atomically: true, encoding: .utf8)
            let migrated = try await shop.run(["migrate", "Product", file])
            #expect(migrated.status == 1 && migrated.stderr.split(separator: "\n").count == 1, "\(step): \(migrated.stderr)")
        }
        #expect(try await shop.run(["index", "Product", "--list"]).stdout.isEmpty, "no index was made")
        #expect(try await shop.run(["export", "Product"]).stdout == before)
        // index does one thing: attributes, --list or --drop (found by a black-box probe).
        for arguments in [
            ["index", "Product", "brand", "--drop", "brand"], ["index", "Product", "--list", "--drop", "brand"], ["index", "Product"],
        ] {
            let result = try await shop.run(arguments)
            #expect(result.status == 64 && result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
        }
        #expect(try await shop.run(["index", "Product", "--list"]).stdout.isEmpty, "no index was made")
    }

    @Test(
        "an option that takes one value, or a flag, given twice is a usage error, never the last one kept silently; repeatable options stay repeatable (found by a review)"
    )
    func optionGivenTwice() async throws {
        let shop = try await Shop()
        // Every option of every command, as ArgumentParser describes them.
        let dump = try await CLI.run(["--experimental-dump-help"])
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var options: [(command: [String], name: String, isFlag: Bool, isRepeating: Bool)] = []
        func walk(_ command: [String: Any], _ path: [String]) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                guard let kind = argument["kind"] as? String, kind == "option" || kind == "flag" else { continue }
                for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                    options.append((path, "--\(name["name"] as? String ?? "")", kind == "flag", argument["isRepeating"] as? Bool ?? false))
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] { walk(sub, path + [sub["commandName"] as? String ?? ""]) }
        }
        walk(try #require(tool["command"] as? [String: Any]), [])
        #expect(options.count > 100, "the dump lists the options: \(options.count)")
        #expect(
            Set(options.filter(\.isRepeating).map(\.name)) == ["--where", "--order", "--group-by", "--sum", "--min", "--max", "--avg", "--model"])
        for option in options {
            // A value that is a path in the test's directory: were the option kept, nothing lands elsewhere.
            let given = option.isFlag ? [option.name] : [option.name, shop.directory.child("x")]
            let result = try await shop.run(option.command + given + given)
            if option.isRepeating {
                #expect(!result.stderr.contains("more than once"), "\(option.command) \(option.name) repeats: \(result.stderr)")
            } else {
                Self.expectFailure(result, 64, "\(option.name) is given more than once")
            }
        }
        // --db before the command and again after it; --name=value counts too.
        Self.expectFailure(try await CLI.run(["--db", shop.db, "find", "Product", "--db", shop.db]), 64, "--db is given more than once")
        Self.expectFailure(try await shop.run(["find", "Product", "--limit=1", "--limit", "2"]), 64, "--limit is given more than once")
        #expect(try await shop.run(["find", "Product", "--count", "--where", "price>1", "--where", "price<100"]).lines == ["1"])
        #expect(try await shop.run(["find", "Product", "--count"]).lines == ["2"], "the store is as it was")
    }

    @Test(
        "--require-index names an index only when declaring it makes the query pass; never one that exists and cannot serve it (found by a black-box probe)"
    )
    func requireIndexAdvice() async throws {
        let shop = try await Shop()
        #expect(try await shop.run(["put", "Order", #"{"object":"o2","items":[{"product":"p1"}],"tags":["a"],"total":4,"rank":2}"#]).status == 0)
        #expect(try await shop.run(["index", "Order", "rank"]).status == 0)
        let conditions = [
            "items[].product=p1", "items[].product^=p", "items[].product>p", "items[].product in p1,p2", "items[].product~=p", "tags~=a", "tags[]=a",
            "tags[]~=a", "total>1", "total in 3,4", "items[].product!=p", "tags[] in a,b", "rank<[2]", "rank>={}",
        ]
        let orders = [["--order", "rank", "--order", "total", "--limit", "2"], ["--order", "total:desc", "--order", "rank:desc"]]
        // Named, found by black-box probes: the element paths (they named nothing), the order's
        // keys (they named `rank`, which exists).
        let named = ["tags[]=a": "tags[]", "tags[] in a,b": "tags[]", "--order rank --order total --limit 2": "rank,total"]
        for arguments in conditions.map({ ["--where", $0] }) + orders {
            let asked = arguments.first == "--where" ? arguments[1] : arguments.joined(separator: " ")
            let first = try await shop.run(["find", "Order"] + arguments + ["--require-index"])
            guard first.status != 0 else { continue }
            #expect(first.status == 2, "\(asked): \(first.stderr)")
            guard let start = first.stderr.range(of: "(satchel index Order '"), let end = first.stderr[start.upperBound...].range(of: "')") else {
                #expect(first.stderr.contains("no condition or order an index could serve"), "\(asked): \(first.stderr)")
                #expect(named[asked] == nil, "\(asked): \(first.stderr)")
                continue
            }
            let name = String(first.stderr[start.upperBound..<end.lowerBound])
            #expect(named[asked].map { $0 == name } ?? true, "\(asked): \(first.stderr)")
            #expect(try await shop.run(["index", "Order", name]).status == 0)
            let second = try await shop.run(["find", "Order"] + arguments + ["--require-index"])
            #expect(second.status == 0, "\(asked): after 'index Order \(name)': \(second.stderr)")
        }
        // A scan that delivers its order (the ids') and stops after its window reads no more
        // than it answers: not refused (a black-box probe: told to index the id).
        for arguments in [["--order", "object:desc", "--limit", "2"], ["--limit", "1"]] {
            let answer = try await shop.run(["find", "Order"] + arguments + ["--require-index"])
            #expect(answer.status == 0 && !answer.lines.isEmpty, "\(arguments): \(answer.stderr)")
        }
        #expect(try await shop.run(["find", "Order", "--order", "object", "--require-index"]).status == 2, "without a limit, every object")
    }

    @Test("no --db (nor SATCHEL_DB) is a usage error; a read never creates a store")
    func storeRequired() async throws {
        let directory = TemporaryDirectory()
        let missing = directory.child("nothing-here")
        Self.expectFailure(
            try await CLI.run(["find", "Product"], environment: ["SATCHEL_DB": ""]), 64, "no store given: pass --db DIR (or set SATCHEL_DB)")
        for read in [["find", "Product"], ["stats"], ["check"], ["errors"], ["index", "Product", "--list"]] {
            Self.expectFailure(try await CLI.run(["--db", missing] + read), 1, "no store at \(missing)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "no store was made")
        // SATCHEL_DB stands for --db; a write creates the store.
        #expect(try await CLI.run(["put", "Product", #"{"object":"p1","a":1}"#], environment: ["SATCHEL_DB": missing]).status == 0)
        #expect(try await CLI.run(["find", "Product", "--count"], environment: ["SATCHEL_DB": missing]).lines == ["1"])
    }

    @Test("a misspelled command is named, with the nearest one; --version prints the CHANGELOG's version")
    func misspelledCommand() async throws {
        let shop = try await Shop()
        Self.expectFailure(try await shop.run(["fnd", "Product"]), 64, "'fnd' is not a satchel command; did you mean 'find'?")
        Self.expectFailure(try await CLI.run(["imprt", "Product", "x.json"]), 64, "did you mean 'import'?")
        Self.expectFailure(try await CLI.run(["frobnicate"]), 64, "'frobnicate' is not a satchel command (see 'satchel help')")
        // The help of no command (found by a black-box probe: the whole help, exit 0).
        Self.expectFailure(try await CLI.run(["help", "fnd"]), 64, "'fnd' is not a satchel command; did you mean 'find'?")
        #expect(try await CLI.run(["help", "find"]).status == 0)
        let version = try await CLI.run(["--version"])
        #expect(version.status == 0)
        let changelog = try String(contentsOf: Fixtures.directory.deletingLastPathComponent().appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## 0.") || $0.hasPrefix("## 1.") }
        #expect(newest.map { $0.dropFirst(3).hasPrefix(version.lines.first ?? "?") } == true, "\(version.stdout) vs \(String(describing: newest))")
    }

    @Test("--limit and --offset say what they take")
    func limits() async throws {
        let shop = try await Shop()
        Self.expectFailure(try await shop.run(["find", "Product", "--limit", "-1"]), 64, "--limit must be a positive integer, not -1")
        Self.expectFailure(try await shop.run(["find", "Product", "--limit", "0"]), 64, "--limit must be a positive integer, not 0")
        Self.expectFailure(try await shop.run(["find", "Product", "--offset", "-2"]), 64, "--offset must be zero or a positive integer")
        #expect(try await shop.run(["find", "Product", "--order", "price", "--limit", "1", "--offset", "1"]).lines.first?.contains("p2") == true)
    }

    @Test("an offset and a limit that add up past Int.max: the matches there are, no crash (found by a black-box probe)")
    func hugeWindow() async throws {
        let shop = try await Shop()
        let max = String(Int.max)
        // Sorted in memory (no index on price), and searched through a text index.
        let all = try await shop.run(["find", "Product", "--order", "price", "--limit", max, "--offset", "1"])
        #expect(all.status == 0 && all.lines.count == 1 && all.lines.first?.contains("p2") == true, "\(all.stderr)")
        let past = try await shop.run(["find", "Product", "--order", "price", "--offset", max, "--limit", "5"])
        #expect(past.status == 0 && past.stdout.isEmpty && past.stderr.isEmpty, "\(past.stderr)")
        let explained = try await shop.run(["find", "Product", "--order", "price", "--offset", max, "--limit", "5", "--explain"])
        #expect(explained.status == 0 && explained.stdout.contains("keeping the top \(max)"), "\(explained.stdout)\(explained.stderr)")
        #expect(try await shop.run(["index", "Product", "--text", "name"]).status == 0)
        let searched = try await shop.run(["find", "Product", "--match", "lamp", "--offset", max, "--limit", "5"])
        #expect(searched.status == 0 && searched.stdout.isEmpty && searched.stderr.isEmpty, "\(searched.stderr)")
        let found = try await shop.run(["find", "Product", "--match", "lamp", "--offset", "0", "--limit", max])
        #expect(found.status == 0 && found.lines.count == 1 && found.lines.first?.contains("p1") == true, "\(found.stderr)")
    }

    @Test("find --id of a missing object: one line on stderr, exit 1")
    func missingID() async throws {
        let shop = try await Shop()
        Self.expectFailure(try await shop.run(["find", "Product", "--id", "nope"]), 1, "no object 'nope' in Product")
        Self.expectFailure(
            try await shop.run(["find", "Product", "--id", "p1", "--where", "price>100"]), 1, "object 'p1' of Product does not match the conditions")
        #expect(try await shop.run(["find", "Product", "--id", "p1"]).status == 0)
    }

    @Test("an update the null rule turns into a delete says so on stderr; stdout stays empty")
    func nullRuleDelete() async throws {
        let shop = try await Shop()
        let deleted = try await shop.run(["update", "Product", "p1", #"{"name":null,"brand":null,"price":null}"#])
        #expect(deleted.status == 0)
        #expect(deleted.stdout.isEmpty)
        #expect(deleted.stderr == "satchel: deleted Product p1: no attribute left (null removes an attribute)\n")
        #expect(try await shop.run(["find", "Product", "--id", "p1"]).status == 1)
        let put = try await shop.run(["put", "Order", #"{"object":"o1","total":null}"#])
        #expect(put.status == 0 && put.stdout.isEmpty && put.stderr.contains("deleted Order o1"))
    }
}
