import Foundation
import Satchel
import SatchelSync
import SatchelTestSupport
import Testing

/// `satchel sync --backend kinto` against the real Kinto server the test run started
/// (`SATCHEL_KINTO_URL`, see scripts/kinto.sh).
@Suite(
    "satchel sync --backend kinto",
    .enabled(
        if: ProcessInfo.processInfo.environment["SATCHEL_KINTO_URL"] != nil || ProcessInfo.processInfo.environment["SATCHEL_KINTO_REQUIRED"] == "1",
        "no Kinto server: run `bash scripts/test.sh`"))
struct KintoCLITests {
    @Test(
        "two stores sync through a bucket; a concurrent edit exits 3 and is resolved by retry; edits of different attributes merge; --on-conflict decides"
    )
    func sync() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["SATCHEL_KINTO_URL"], "SATCHEL_KINTO_URL is not set")
        let bucket = "cli-\(UUID().uuidString.prefix(8).lowercased())"
        let directory = TemporaryDirectory()
        let (a, b) = (directory.child("a"), directory.child("b"))
        func sync(_ db: String, _ extra: [String] = ["--user", "cli", "--password", "pw"]) async throws -> CLI.Result {
            try await CLI.run(["--db", db, "sync", "--backend", "kinto", "--url", url, "--bucket", bucket, "--model", "Note"] + extra)
        }

        _ = try await CLI.run(["--db", a, "put", "Note", #"{"object":"n1","title":"Hello","tags":["x"]}"#])
        _ = try await CLI.run(["--db", a, "put", "Note", #"{"object":"odd id/1","title":"Odd"}"#])
        let first = try await sync(a)
        #expect(first.status == 0, "\(first.stderr)")
        // The last line counts the objects of the whole sync: its models' `ok` lines' (found by a
        // black-box probe: it said 0).
        let okLines = try first.lines.map { try JSONObject(parsing: $0) }.filter { $0["status"] == "ok" }
        let pulledInAll = okLines.compactMap { $0["processed"]?.intValue }.reduce(0, +)
        #expect(okLines.count == 1 && first.lines.last == #"{"processed":\#(pulledInAll),"status":"complete"}"#, "\(first.stdout)")
        let pulled = try await sync(b)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try await CLI.run(["--db", b, "find", "Note", "--id", "odd id/1"]).lines == [#"{"object":"odd id/1","title":"Odd"}"#])

        // Both edit n1; b syncs second and meets Kinto's 412.
        _ = try await CLI.run(["--db", a, "update", "Note", "n1", #"{"title":"From A"}"#])
        _ = try await CLI.run(["--db", b, "update", "Note", "n1", #"{"title":"From B"}"#])
        #expect(try await sync(a).status == 0)
        let conflict = try await sync(b)
        #expect(conflict.status == 3, "\(conflict.stderr)")
        let errors = try await CLI.run(["--db", b, "errors", "Note"])
        #expect(errors.stdout.contains(#""server":{"tags":["x"],"title":"From A"}"#), "\(errors.stdout)")
        #expect(try await CLI.run(["--db", b, "resolve", "Note", "n1", "--action", "retry"]).status == 0)
        #expect(try await sync(b).status == 0)
        #expect(try await sync(a).status == 0)
        #expect(try await CLI.run(["--db", a, "find", "Note", "--id", "n1"]).lines == [#"{"object":"n1","tags":["x"],"title":"From B"}"#])

        // Different attributes (a retags, b retitles, each in a run of its own): b's sync meets
        // the 412, merges it and sends the title again in the same run, exit 0.
        _ = try await CLI.run(["--db", a, "update", "Note", "n1", #"{"tags":["y"]}"#])
        _ = try await CLI.run(["--db", b, "update", "Note", "n1", #"{"title":"B again"}"#])
        #expect(try await sync(a).status == 0)
        let merged = try await sync(b)
        #expect(merged.status == 0, "\(merged.stderr)")
        #expect(merged.lines.contains { $0.contains("conflicts: merged n1 (changed here: title)") }, "\(merged.lines)")
        #expect(try await sync(a).status == 0)
        #expect(try await CLI.run(["--db", a, "find", "Note", "--id", "n1"]).lines == [#"{"object":"n1","tags":["y"],"title":"B again"}"#])

        // A true conflict decided by --on-conflict keep-local: b's title reaches the server, exit 0.
        _ = try await CLI.run(["--db", a, "update", "Note", "n1", #"{"title":"A2"}"#])
        _ = try await CLI.run(["--db", b, "update", "Note", "n1", #"{"title":"B2"}"#])
        #expect(try await sync(a).status == 0)
        let kept = try await sync(b, ["--user", "cli", "--password", "pw", "--on-conflict", "keep-local"])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.lines.contains { $0.contains("resolved n1 (keptLocal; changed on both sides: title)") }, "\(kept.lines)")
        #expect(try await sync(a).status == 0)
        #expect(try await CLI.run(["--db", a, "find", "Note", "--id", "n1"]).lines == [#"{"object":"n1","tags":["y"],"title":"B2"}"#])
        let wrong = try await sync(b, ["--on-conflict", "mine"])
        #expect(wrong.status != 0 && wrong.stderr.contains("keep-local"), "\(wrong.stderr)")

        // A later run without credentials syncs on the stored session (which keeps the password
        // Kinto asks for on every request); after a logout it needs them again, and without a
        // bucket it is refused: one-line errors.
        _ = try await CLI.run(["--db", a, "update", "Note", "n1", #"{"title":"Sessioned"}"#])
        let sessioned = try await sync(a, [])
        #expect(sessioned.status == 0, "\(sessioned.stderr)")
        #expect(try await sync(b).status == 0)
        #expect(try await CLI.run(["--db", b, "find", "Note", "--id", "n1"]).lines == [#"{"object":"n1","tags":["y"],"title":"Sessioned"}"#])
        #expect(try await CLI.run(["--db", a, "logout"]).status == 0)
        let noPassword = try await sync(a, [])
        #expect(noPassword.status != 0 && noPassword.stderr.contains("--password"), "\(noPassword.stderr)")
        let noBucket = try await CLI.run(["--db", a, "sync", "--backend", "kinto", "--url", url])
        #expect(noBucket.status != 0 && noBucket.stderr.contains("--bucket"), "\(noBucket.stderr)")
    }

    @Test("a store syncs one bucket: another is refused before anything is sent, until a client reset (found by a black-box probe)")
    func oneBucket() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["SATCHEL_KINTO_URL"], "SATCHEL_KINTO_URL is not set")
        let root = try #require(URL(string: url))
        let (first, second) = ("cli-\(UUID().uuidString.prefix(8).lowercased())", "cli-\(UUID().uuidString.prefix(8).lowercased())")
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        func sync(_ bucket: String) async throws -> CLI.Result {
            try await CLI.run(["--db", db, "sync", "--backend", "kinto", "--url", url, "--bucket", bucket, "--model", "Note"])
        }
        _ = try await CLI.run(["--db", db, "put", "Note", #"{"object":"n1","title":"Hello"}"#])
        let login = try await CLI.run([
            "--db", db, "sync", "--backend", "kinto", "--url", url, "--bucket", first, "--model", "Note", "--user", "cli", "--password", "pw",
        ])
        #expect(login.status == 0, "\(login.stderr)")
        _ = try await CLI.run(["--db", db, "put", "Note", #"{"object":"n2","title":"Later"}"#])
        let refused = try await sync(second)
        #expect(refused.status != 0 && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains(first) && refused.stderr.contains("reset --client"), "\(refused.stderr)")
        let http = SyncHTTPClient(timeout: 30)
        let auth = ["Authorization": SyncHTTPClient.basicAuthorization(Credentials(user: "cli", password: "pw"))]
        let other = try await http.send("GET", SyncHTTPClient.url(root, "buckets/\(second)/collections/Note/records"), headers: auth)
        #expect(other.status != 200 || (try? other.json(""))?["data"]?.arrayValue?.isEmpty == true, "nothing went to \(second): \(other.text)")
        #expect(try await sync(first).status == 0, "the first bucket still syncs")
        #expect(try await CLI.run(["--db", db, "reset", "--client", "--backend", "kinto", "--url", url, "--bucket", first]).status == 0)
        let moved = try await sync(second)
        #expect(moved.status == 0, "\(moved.stderr)")
    }

    @Test("a record's attachment (kinto-attachment) arrives as a blob attribute, read byte for byte by satchel blob")
    func attachment() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["SATCHEL_KINTO_URL"], "SATCHEL_KINTO_URL is not set")
        let root = try #require(URL(string: url))
        let bucket = "cli-\(UUID().uuidString.prefix(8).lowercased())"
        let directory = TemporaryDirectory()
        let db = directory.child("db")
        // Another client puts a record with an attachment, as kinto-attachment's API says.
        let http = SyncHTTPClient(timeout: 30)
        let auth = ["Authorization": SyncHTTPClient.basicAuthorization(Credentials(user: "cli", password: "pw"))]
        for path in ["buckets/\(bucket)", "buckets/\(bucket)/collections/Note"] {
            #expect(try await http.send("PUT", SyncHTTPClient.url(root, path), headers: auth, body: Data(#"{"data":{}}"#.utf8)).status == 201)
        }
        let bytes = Data((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 5) })
        let form = MultipartForm([
            MultipartForm.Part(name: "attachment", filename: "scan.pdf", contentType: "application/pdf", data: bytes),
            MultipartForm.Part(name: "data", contentType: "application/json", data: Data(#"{"title":"Scan"}"#.utf8)),
        ])
        let upload = try await http.send(
            "POST", SyncHTTPClient.url(root, "buckets/\(bucket)/collections/Note/records/n1/attachment"),
            headers: auth.merging(["Content-Type": form.contentType]) { $1 }, body: form.body)
        #expect(upload.status == 201, "\(upload.text)")

        let sync = try await CLI.run([
            "--db", db, "sync", "--backend", "kinto", "--url", url, "--bucket", bucket, "--model", "Note", "--user", "cli", "--password", "pw",
        ])
        #expect(sync.status == 0, "\(sync.stderr)")
        let out = directory.child("scan.pdf")
        let blob = try await CLI.run(["--db", db, "blob", "Note", "n1", "attachment", "--out", out])
        #expect(blob.status == 0, "\(blob.stderr)")
        #expect(FileManager.default.contents(atPath: out) == bytes)
        let found = try await CLI.run(["--db", db, "find", "Note", "--id", "n1"])
        #expect(
            found.lines.count == 1 && found.lines[0].contains(#""title":"Scan""#) && found.lines[0].contains(#""attachment":"blob:"#),
            "\(found.lines)")
    }
}
