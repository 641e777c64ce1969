import Foundation
import LoopbackSupport
import SalesforceTestServer
import Satchel
import SatchelTestSupport
import Testing

/// `satchel sync --backend salesforce` and `satchel picklist` against the loopback org, over
/// several runs of the CLI on one store, checked on the server's side.
@Suite("satchel sync --backend salesforce")
struct SalesforceCLITests {
    static func sync(_ db: String, _ server: SalesforceServer, _ extra: [String] = []) -> [String] {
        ["--db", db, "sync", "--backend", "salesforce", "--url", server.url.absoluteString] + extra
    }

    @Test("--token and --objects on the first run; the second run reuses the stored token and sync objects; picklists; an expired token is one line")
    func severalRuns() async throws {
        let server = try await SalesforceServer.start(try SalesforceFixture.named("org"))
        defer { Task { await server.stop() } }
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let objects = directory.child("objects.json")
        let list: JSONValue = [
            [
                "name": "Account", "filter": "Industry = 'Energy'", "onlyList": ["Name", "Industry", "Tier__c", "Active__c", "Discount__c"],
                "extra-device": ["isFavourite"],
            ],
            ["name": "Contact", "fetch-limit": 3, "fetch-order": "LastName DESC"],
        ]
        try Data(list.jsonBytes).write(to: URL(fileURLWithPath: objects))
        let token = await server.token(for: "ann")
        // No session stored and no token: the one line names what Salesforce takes.
        let noToken = try await CLI.run(Self.sync(db, server, ["--objects", objects]))
        #expect(noToken.status == 1 && noToken.stderr.contains("pass --token"), "\(noToken.stderr)")
        #expect(!noToken.stderr.contains("--password"), "\(noToken.stderr)")
        let first = try await CLI.run(Self.sync(db, server, ["--token", token, "--objects", objects]))
        #expect(first.status == 0, "\(first.stderr)")
        let energy = try await server.records("Account").values.filter { try JSONValue(parsing: $0)["Industry"] == "Energy" }.count
        #expect(try await CLI.run(["--db", db, "find", "Account", "--count"]).lines == [String(energy)])
        #expect(try await CLI.run(["--db", db, "find", "Contact", "--count"]).lines == ["3"], "the first 3 by LastName descending")
        let anAccount = try #require(try await CLI.run(["--db", db, "find", "Account", "--limit", "1"]).lines.first)
        let account = try JSONValue(parsing: Data(anAccount.utf8))
        #expect(account["Score__c"] == nil, "not in onlyList")
        let id = try #require(account["object"]?.stringValue)
        #expect(try await CLI.run(["--db", db, "update", "Account", id, #"{"isFavourite":true,"Name":"Renamed"}"#]).status == 0)

        // The second run: no token, no objects — both stored.
        let before = await server.requests.count
        let second = try await CLI.run(Self.sync(db, server))
        #expect(second.status == 0, "\(second.stderr)")
        let later = await server.requests.dropFirst(before)
        let query = try #require(later.compactMap { $0.query["q"] }.first { $0.contains("FROM Account") })
        #expect(query.contains("(Industry = 'Energy')") && !query.contains("Score__c") && !query.contains("isFavourite"))
        let pushed = try #require(later.first { $0.method == "PATCH" && $0.path.hasSuffix("/composite/sobjects") })
        let text = String(decoding: pushed.body, as: UTF8.self)
        #expect(text.contains("Renamed") && !text.contains("isFavourite"), "device-only attributes never leave")
        #expect(try JSONValue(parsing: try #require(await server.records("Account")[id]))["Name"] == "Renamed")

        // Picklists, from the stored describe.
        // Industry lists an inactive value (Agriculture) first: validFor's bit 0 is it, Energy's bit 1.
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Tier__c", "--controller", "Energy"]).lines == ["Gold", "Silver"])
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Tier__c", "--controller", "Retail"]).lines == ["Bronze"])
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Tier__c", "--controller", "Banking"]).lines == ["Gold"])
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Discount__c", "--controller", "false"]).lines == ["None"])
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Discount__c", "--controller", "true"]).lines == ["Low", "High"])
        let industries = try await CLI.run(["--db", db, "picklist", "Account", "Industry"])
        #expect(industries.lines == ["Energy", "Retail", "Banking"])
        // A controller value the controlling field does not have is a mistake, not an empty list.
        let unknownValue = try await CLI.run(["--db", db, "picklist", "Account", "Tier__c", "--controller", "Nope"])
        #expect(unknownValue.status == 1 && unknownValue.stdout.isEmpty, "\(unknownValue.stdout)")
        #expect(unknownValue.stderr.split(separator: "\n").count == 1, "\(unknownValue.stderr)")
        #expect(
            unknownValue.stderr.contains("'Nope' is not a value of 'Industry'") && unknownValue.stderr.contains("Agriculture, Energy"),
            "\(unknownValue.stderr)")
        let notBoolean = try await CLI.run(["--db", db, "picklist", "Account", "Discount__c", "--controller", "yes"])
        #expect(notBoolean.status == 1 && notBoolean.stderr.contains("false, true"), "\(notBoolean.stderr)")
        #expect(try await CLI.run(["--db", db, "picklist", "Account", "Discount__c", "--controller", "TRUE"]).lines == ["Low", "High"])
        let notPicklist = try await CLI.run(["--db", db, "picklist", "Account", "Name"])
        #expect(notPicklist.status == 1 && notPicklist.stderr.contains("not a picklist"), "\(notPicklist.stderr)")
        let refused = try await CLI.run(["--db", db, "update", "Account", id, #"{"Tier__c":"Bronze"}"#])
        #expect(refused.status == 1 && refused.stderr.contains("not valid for 'Tier__c'"), "\(refused.stderr)")

        // An expired token with no refresh token: one line, non-zero, nothing lost.
        await server.expireTokens()
        #expect(try await CLI.run(["--db", db, "update", "Account", id, #"{"Name":"Again"}"#]).status == 0)
        let expired = try await CLI.run(Self.sync(db, server))
        #expect(expired.status != 0 && expired.status != 3 && expired.stderr.contains("log in again"), "\(expired.stderr)")
        #expect(expired.stderr.split(separator: "\n").count == 1)
        let fresh = await server.token(for: "ann")
        #expect(try await CLI.run(Self.sync(db, server, ["--token", fresh])).status == 0)
        #expect(try JSONValue(parsing: try #require(await server.records("Account")[id]))["Name"] == "Again")

        // Tokens off the command line: standard input, or SATCHEL_TOKEN.
        await server.expireTokens()
        let piped = try await CLI.run(Self.sync(db, server, ["--token-stdin"]), input: await server.token(for: "ann") + "\n")
        #expect(piped.status == 0, "\(piped.stderr)")
        await server.expireTokens()
        let environment = try await CLI.run(Self.sync(db, server), environment: ["SATCHEL_TOKEN": await server.token(for: "ann")])
        #expect(environment.status == 0, "\(environment.stderr)")
    }

    @Test("bad salesforce arguments are one-line errors")
    func badArguments() async throws {
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        let objects = directory.child("objects.json")
        try Data(#"[{"name":"Account","fetch-limit":"many"}]"#.utf8).write(to: URL(fileURLWithPath: objects))
        for arguments in [
            ["sync", "--backend", "salesforce", "--url", "salesforce"],
            ["sync", "--backend", "salesforce", "--url", "http://127.0.0.1:1", "--objects", objects],
            ["sync", "--backend", "salesforce", "--url", "http://127.0.0.1:1", "--objects", directory.child("missing.json")],
            ["sync", "--backend", "kinto", "--url", "http://127.0.0.1:1/v1", "--bucket", "b", "--token", "t"],
        ] {
            let result = try await CLI.run(["--db", db] + arguments)
            #expect(result.status != 0 && result.status != 3, "\(arguments)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
        }
    }
}
