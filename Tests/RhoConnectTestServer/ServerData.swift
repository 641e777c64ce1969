import Foundation
internal import MultipartKit
internal import NIOCore

/// The server's state and its protocol rules; the HTTP side is ``RhoConnectServer``'s.
struct ServerData {
    var fixture: Fixture
    /// `http://127.0.0.1:PORT`, for `{{server}}` in fixture values.
    let root: String
    /// The backend's data (the MD): by user (`""` for `app` sources), source, object.
    var master: [String: [String: [String: [String: String]]]] = [:]
    var sessions: [String: String] = [:]
    var clients: [String: Client] = [:]
    var blobs: [String: Data]
    var bulkFiles: [String: Data] = [:]
    var bulkWaits = 0
    var sabotage: [(String, Int, Data)] = []
    var requests: [RhoConnectServer.Request] = []
    private var lastToken: Int64 = 0
    private var nextID = 1000

    init(fixture: Fixture, root: String) {
        self.fixture = fixture
        self.root = root
        blobs = fixture.blobs
    }

    // MARK: - Data

    func owner(_ source: String, user: String) -> String { fixture.sources[source]?.partition == "app" ? "" : user }

    /// The MD of `source` for `user`, seeded from the fixture on first use.
    mutating func data(_ source: String, user: String) -> [String: [String: String]] {
        let owner = owner(source, user: user)
        if let objects = master[owner]?[source] { return objects }
        let seeded = (fixture.sources[source]?.objects ?? [:]).mapValues { $0.mapValues { $0.replacingOccurrences(of: "{{server}}", with: root) } }
        master[owner, default: [:]][source] = seeded
        return seeded
    }

    mutating func setData(_ source: String, user: String, _ objects: [String: [String: String]]) {
        master[owner(source, user: user), default: [:]][source] = objects
    }

    /// Applies a server-side change to one user's data, or to every user's.
    mutating func apply(_ change: Fixture.Change) {
        var users = Set(master.keys).union(sessions.values).union(clients.values.map(\.user)).union(fixture.users.keys)
        if let user = change.user { users = [user] }
        for user in users.isEmpty ? [""] : users.sorted() {
            var objects = data(change.source, user: user)
            for (id, attributes) in change.insert { objects[id] = attributes }
            for (id, attributes) in change.update { objects[id, default: [:]].merge(attributes) { $1 } }
            for (id, names) in change.remove {
                for name in names { objects[id]?[name] = nil }
                if objects[id]?.isEmpty == true { objects[id] = nil }
            }
            for id in change.delete { objects[id] = nil }
            setData(change.source, user: user, objects)
        }
    }

    mutating func token() -> String {
        // Microseconds since 2009-01-01, as RhoConnect's tokens are; always increasing.
        let now = Int64((Date().timeIntervalSince1970 - 1_230_768_000) * 1_000_000)
        lastToken = max(now, lastToken + 1)
        return String(lastToken)
    }

    func rule(_ operation: String, source: String, id: String? = nil, attributes: [String: String?] = [:]) -> Fixture.Rule? {
        fixture.rules.first { $0.applies(operation, source: source, id: id, attributes: attributes) }
    }

    // MARK: - Routing

    mutating func route(_ request: RhoConnectServer.Request) -> Answer {
        let parts = request.path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
        let path = parts.joined(separator: "/")
        let method = request.method
        func `is`(_ m: String, _ p: String) -> Bool { method == m && path == p }
        if `is`("POST", "rc/v1/app/login") || `is`("POST", "application/clientlogin") { return login(request) }
        if method == "GET", parts.count == 2, parts[0] == "blobs" {
            guard session(request) != nil else { return .notAuthenticated }
            guard let data = blobs[parts[1]] else { return .text(404, "no such blob") }
            return Answer(contentType: "application/octet-stream", body: data)
        }
        if method == "GET", parts.first == "data" {
            guard session(request) != nil else { return .notAuthenticated }
            guard let data = bulkFiles[request.path] else { return .text(404, "no such file") }
            return Answer(contentType: "application/octet-stream", body: data)
        }
        guard let user = session(request) else { return .notAuthenticated }
        var answer: Answer
        if `is`("POST", "rc/v1/clients") || `is`("GET", "application/clientcreate") {
            let id = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            clients[id] = Client(user: user)
            answer = .json(["client": ["client_id": id]])
        } else if method == "POST", parts.count == 5, path.hasPrefix("rc/v1/clients/"), parts[4] == "reset" {
            answer = reset(parts[3], user: user, body: request.body)
        } else if `is`("GET", "application/clientreset") {
            answer = reset(request.query["client_id"] ?? "", user: user, body: Data())
        } else if parts.count == 3, path.hasPrefix("app/v1/"), method == "GET" || method == "POST" {
            let source = parts[2]
            answer = withClient(request, user: user) { data, id in
                method == "GET" ? data.query(source, client: id, user: user, request.query) : data.cud(source, client: id, user: user, request)
            }
        } else if `is`("GET", "application") {
            answer = withClient(request, user: user) { data, id in
                data.query(request.query["source_name"] ?? "", client: id, user: user, request.query)
            }
        } else if `is`("POST", "application") {
            answer = withClient(request, user: user) { data, id in data.cud(nil, client: id, user: user, request) }
        } else if `is`("POST", "rc/v1/app/search") {
            answer = withClient(request, user: user) { data, id in data.search(client: id, user: user, request) }
        } else if `is`("POST", "rc/v1/app/bulk_data") {
            let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            answer = withClient(request, user: user) { data, id in
                data.bulk(client: id, user: user, partition: body["partition"] as? String ?? "user", sources: body["sources"] as? [String])
            }
        } else if `is`("GET", "application/bulk_data") {
            let sources = request.query["sources[]"].map { [$0] }
            answer = withClient(request, user: user) { data, id in
                data.bulk(client: id, user: user, partition: request.query["partition"] ?? "user", sources: sources)
            }
        } else {
            answer = .text(404, "no route for \(method) \(request.path)")
        }
        if parts.first == "application" { answer.headers["Warning"] = "299 - \"The /application routes are deprecated: use protocol 4's\"" }
        return answer
    }

    func session(_ request: RhoConnectServer.Request) -> String? {
        guard let cookie = request.cookie else { return nil }
        for pair in cookie.split(separator: ";") {
            let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2, parts[0] == "rhoconnect_session", let user = sessions[parts[1]] { return user }
        }
        return nil
    }

    mutating func withClient(_ request: RhoConnectServer.Request, user: String, _ body: (inout ServerData, String) -> Answer) -> Answer {
        guard let id = request.clientID, var client = clients[id] else { return .unknownClient }
        if client.user != user {
            // The client moved to another user: its objects are flushed.
            client = Client(user: user)
            clients[id] = client
        }
        return body(&self, id)
    }

    // MARK: - Login, reset

    mutating func login(_ request: RhoConnectServer.Request) -> Answer {
        guard let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] else {
            return .text(500, "Server error while processing client data")
        }
        let login = body["login"] as? String ?? ""
        let password = body["password"] as? String ?? ""
        if let rule = fixture.rules.first(where: { $0.operation == "login" }) { return .text(401, rule.message) }
        guard !login.isEmpty, fixture.users.isEmpty || fixture.users[login] == password else {
            return .text(401, "Unable to authenticate '\(login)'")
        }
        let cookie = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        sessions[cookie] = login
        var answer = Answer(contentType: "text/plain")
        answer.headers["Set-Cookie"] = "rhoconnect_session=\(cookie); path=/; HttpOnly"
        return answer
    }

    mutating func reset(_ id: String, user: String, body: Data) -> Answer {
        guard clients[id] != nil else { return .unknownClient }
        let parsed = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        if let sources = parsed?["sources"] as? [[String: Any]] {
            for source in sources { if let name = source["name"] as? String { clients[id]?.sources[name] = nil } }
        } else {
            clients[id] = Client(user: user)
        }
        return Answer(contentType: "text/plain")
    }

    // MARK: - Query

    mutating func query(_ source: String, client id: String, user: String, _ query: [String: String]) -> Answer {
        guard query["version"] == "3" else { return .text(500, "unsupported version \(query["version"] ?? "none")") }
        let size = max(1, Int(query["p_size"] ?? "") ?? 500)
        var doc = clients[id]?.sources[source] ?? ClientSource()
        defer { clients[id]?.sources[source] = doc }
        if let pending = doc.pageToken {
            if query["token"] == pending {
                // Acknowledged: the page and its errors are done with.
                doc.pageToken = nil
                doc.page = nil
            } else if query["token"] == nil {
                // No token: the client lost its state; the pending page is dropped.
                doc.pageToken = nil
                doc.page = nil
            } else if let page = doc.page {
                return Answer(headers: ["X-Rhoconnect-PAGE-TOKEN": pending], body: page)
            }
        }
        let master = data(source, user: user)
        var command: [String: Any] = [:]
        if let rule = rule("query", source: source) { command["source-error"] = ["query-error": ["message": rule.message]] }
        if let version = fixture.sources[source]?.schemaVersion, doc.schemaSeen != version {
            doc.schemaSeen = version
            let token = token()
            let page = Self.page(token: token, count: 0, total: master.count, ["schema-changed": "true"])
            doc.pageToken = token
            doc.page = page
            return Answer(headers: ["X-Rhoconnect-PAGE-TOKEN": token], body: page)
        }
        // The diff of the MD and the CD, a page of objects at a time, recorded into the CD.
        var inserts: [String: [String: String]] = [:]
        var deletes: [String: [String: String]] = [:]
        var objects = 0
        for object in Set(master.keys).union(doc.known.keys).sorted() where objects < size {
            let now = master[object] ?? [:]
            let before = doc.known[object] ?? [:]
            let insert = now.filter { before[$0.key] != $0.value }
            let delete = before.filter { now[$0.key] != $0.value }
            guard !insert.isEmpty || !delete.isEmpty else { continue }
            if !insert.isEmpty { inserts[object] = insert }
            if !delete.isEmpty { deletes[object] = delete }
            objects += 1
            doc.known[object] = now.isEmpty ? nil : now
        }
        if !inserts.isEmpty { command["insert"] = inserts }
        if !deletes.isEmpty { command["delete"] = deletes }
        if !doc.links.isEmpty {
            command["links"] = doc.links.mapValues { ["l": $0] }
            doc.links = [:]
        }
        if let metadata = fixture.sources[source]?.metadata, doc.metadataSeen != metadata {
            command["metadata"] = metadata
            doc.metadataSeen = metadata
        }
        for (key, value) in doc.errors { command[key] = value }
        if !doc.rollbacks.isEmpty { command["update-rollback"] = doc.rollbacks }
        doc.errors = [:]
        doc.rollbacks = [:]
        // A token only for a page with data: errors alone are delivered once, not resent.
        let hasData = !inserts.isEmpty || !deletes.isEmpty || command["links"] != nil
        let token = hasData ? token() : ""
        let page = Self.page(token: token, count: inserts.count + deletes.count, total: master.count, command)
        if hasData {
            doc.pageToken = token
            doc.page = page
        }
        return Answer(
            headers: ["X-Rhoconnect-PAGE-TOKEN": token, "X-Rhoconnect-PAGE-OBJECT-COUNT": String(inserts.count + deletes.count)], body: page)
    }

    static func page(token: String, count: Int, total: Int, _ command: [String: Any]) -> Data {
        let page: [Any] = [["version": 3], ["token": token], ["count": count], ["progress_count": 0], ["total_count": total], command]
        return (try? JSONSerialization.data(withJSONObject: page, options: [.sortedKeys])) ?? Data()
    }

    // MARK: - CUD

    mutating func cud(_ routeSource: String?, client id: String, user: String, _ request: RhoConnectServer.Request) -> Answer {
        var files: [String: Data] = [:]
        let json: Any?
        if let type = request.contentType, type.hasPrefix("multipart/form-data") {
            guard let parts = Self.multipart(request.body, contentType: type), let cud = parts["cud"] else {
                return .text(500, "Server error while processing client data")
            }
            files = parts
            json = try? JSONSerialization.jsonObject(with: cud)
        } else {
            json = try? JSONSerialization.jsonObject(with: request.body)
        }
        guard let body = json as? [String: Any], let source = routeSource ?? body["source_name"] as? String else {
            return .text(500, "Server error while processing client data")
        }
        let blobFields = body["blob_fields"] as? [String] ?? []
        var master = data(source, user: user)
        var doc = clients[id]?.sources[source] ?? ClientSource()
        func attributes(_ value: Any) -> [String: String?] {
            (value as? [String: Any] ?? [:]).mapValues { $0 is NSNull ? nil : Fixture.string($0) }
        }
        func refuse(_ kind: String, _ object: String, _ pushed: [String: String?], _ message: String) {
            var section = doc.errors["\(kind)-error"] ?? [:]
            section[object] = pushed.mapValues { $0 ?? "" }
            section["\(object)-error"] = ["message": message]
            doc.errors["\(kind)-error"] = section
        }
        // Creates, then updates, then deletes, as RhoConnect processes a CUD request.
        for (temp, value) in (body["create"] as? [String: Any] ?? [:]).sorted(by: { $0.key < $1.key }) {
            var pushed = attributes(value)
            if let rule = rule("create", source: source, id: temp, attributes: pushed) {
                refuse("create", temp, pushed, rule.message)
                continue
            }
            for field in blobFields { if let data = files["\(field)-\(temp)"] { pushed[field] = storeBlob(data) } }
            nextID += 1
            let object = String(nextID)
            let stored = pushed.compactMapValues { $0 }
            master[object] = stored
            doc.known[object] = stored
            // RhoConnect keeps no record of the temporary ids it linked: a create sent again is
            // made again.
            doc.links[temp] = object
        }
        for (object, value) in (body["update"] as? [String: Any] ?? [:]).sorted(by: { $0.key < $1.key }) {
            var pushed = attributes(value)
            let message =
                rule("update", source: source, id: object, attributes: pushed)?.message
                ?? (master[object] == nil ? "object \(object) not found" : nil)
            if let message {
                refuse("update", object, pushed, message)
                doc.rollbacks[object] = doc.known[object] ?? [:]
                continue
            }
            for field in blobFields { if let data = files["\(field)-\(object)"] { pushed[field] = storeBlob(data) } }
            var current = master[object] ?? [:]
            for (name, value) in pushed { current[name] = value }
            master[object] = current.isEmpty ? nil : current
        }
        for (object, value) in (body["delete"] as? [String: Any] ?? [:]).sorted(by: { $0.key < $1.key }) {
            let pushed = attributes(value)
            if let rule = rule("delete", source: source, id: object, attributes: pushed) {
                refuse("delete", object, pushed, rule.message)
                continue
            }
            master[object] = nil
            doc.known[object] = nil
        }
        setData(source, user: user, master)
        clients[id]?.sources[source] = doc
        return Answer(contentType: "text/plain")
    }

    /// Keeps a pushed blob (RhoConnect's `store_blob`); returns its URL.
    mutating func storeBlob(_ data: Data) -> String {
        nextID += 1
        let name = "\(nextID).bin"
        blobs[name] = data
        return "\(root)/blobs/\(name)"
    }

    /// The parts of a multipart/form-data body, by name.
    static func multipart(_ body: Data, contentType: String) -> [String: Data]? {
        guard let range = contentType.range(of: "boundary=") else { return nil }
        let boundary = String(contentType[range.upperBound...]).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        guard !boundary.isEmpty else { return nil }
        let parser = MultipartParser(boundary: boundary)
        var parts: [String: Data] = [:]
        var name: String?
        var data = Data()
        parser.onHeader = { header, value in
            guard header.lowercased() == "content-disposition", let range = value.range(of: "name=\"") else { return }
            let rest = value[range.upperBound...]
            name = rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
        parser.onBody = { buffer in data.append(contentsOf: buffer.readableBytesView) }
        parser.onPartComplete = {
            if let name { parts[name] = data }
            name = nil
            data = Data()
        }
        do { try parser.execute([UInt8](body)) } catch { return nil }
        return parts
    }

    // MARK: - Search

    mutating func search(client id: String, user: String, _ request: RhoConnectServer.Request) -> Answer {
        guard let body = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any],
            let sources = body["sources"] as? [[String: Any]]
        else { return .text(500, "Server error while processing client data") }
        let size = max(1, Int(request.query["p_size"] ?? "") ?? 500)
        var terms: [String: String] = [:]
        for (key, value) in request.query where key.hasPrefix("search[") && key.hasSuffix("]") {
            terms[String(key.dropFirst(7).dropLast())] = value
        }
        var answer: [Any] = []
        for entry in sources {
            guard let source = entry["name"] as? String else { continue }
            var doc = clients[id]?.sources[source] ?? ClientSource()
            defer { clients[id]?.sources[source] = doc }
            if let token = entry["token"] as? String, token == doc.searchToken {
                if request.query["resend"] == "1", let page = doc.searchPage {
                    answer.append(page)
                    continue
                }
                doc.searchToken = nil
                doc.searchPage = nil
            }
            if let rule = rule("search", source: source) {
                answer.append([["version": 3], ["source": source], ["search-error": ["search-error": ["message": rule.message]]]])
                continue
            }
            let master = data(source, user: user)
            var found: [String: [String: String]] = [:]
            for (object, attributes) in master.sorted(by: { $0.key < $1.key }) where found.count < size && doc.known[object] != attributes {
                let matches = terms.allSatisfy { term in attributes[term.key]?.localizedCaseInsensitiveContains(term.value) == true }
                if matches {
                    found[object] = attributes
                    doc.known[object] = attributes
                }
            }
            guard !found.isEmpty else {
                answer.append([Any]())
                continue
            }
            let token = token()
            let page: [Any] = [
                ["version": 3], ["token": token], ["source": source], ["count": found.count], ["progress_count": 0],
                ["total_count": master.count], ["insert": found],
            ]
            doc.searchToken = token
            doc.searchPage = page
            answer.append(page)
        }
        return .json(answer)
    }

    // MARK: - Bulk data

    mutating func bulk(client id: String, user: String, partition: String, sources requested: [String]?) -> Answer {
        if bulkWaits > 0 {
            bulkWaits -= 1
            return .json(["result": "wait"])
        }
        var names = Set(fixture.sources.filter { $0.value.partition == partition }.map(\.key))
        if partition == "user" { names.formUnion(master[user]?.keys ?? [:].keys) }
        if let requested { names = names.intersection(requested).union(partition == "user" ? Set(requested).subtracting(fixture.sources.keys) : []) }
        guard !names.isEmpty else { return .json(["result": "nop"]) }
        let sources = names.sorted().map { (name: $0, partition: partition, objects: data($0, user: user)) }
        let owner = partition == "app" ? "application" : user
        let stamp = token()
        let name = "\(owner)_\(stamp).data"
        let path = partition == "app" ? "/data/application/\(name)" : "/data/application/\(user)/\(name)"
        guard let file = try? BulkFile.build(sources, entryName: name) else { return .json(["result": "url", "url": ""]) }
        bulkFiles[path + ".rzip"] = file
        // The client now has what the file holds.
        for source in sources {
            var doc = clients[id]?.sources[source.name] ?? ClientSource()
            doc.known = source.objects
            doc.pageToken = nil
            doc.page = nil
            clients[id]?.sources[source.name] = doc
        }
        return .json(["result": "url", "url": path])
    }
}
