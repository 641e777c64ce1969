import Satchel
import SatchelSync

/// One page of a RhoConnect query or search answer: a JSON array of one-key header objects in a
/// fixed order (`version`, `token`, `source` in searches, `count`, `refresh_time`,
/// `progress_count`, `total_count`), then one command object (`insert`, `delete`, `links`,
/// `metadata`, `schema-changed`, `source-error`, `create-error`, `update-error`,
/// `update-rollback`, `delete-error`). This file owns that format.
struct RhoConnectPage: Equatable {
    /// The only page version RhoConnect speaks (protocol 3 and 4 alike).
    static let version = 3

    var token: String?
    /// The longest token taken: a 64-bit number's text is 20 digits; some room for servers that
    /// send another kind of text.
    static let maximumTokenLength = 256
    var source: String?
    var count: Int
    var totalCount: Int?
    var command: JSONObject

    /// Parses one page.
    ///
    /// - Throws: ``SyncError`` `.versionMismatch` for a version other than 3,
    ///   `.protocolViolation` for anything else that is not a page (a missing or misplaced header
    ///   element, a wrong type).
    init(_ value: JSONValue, search: Bool = false) throws(SyncError) {
        guard case .array(let elements) = value else { throw Self.violation("the page is not a JSON array") }
        var index = 0
        /// The value of the header element `key` if it is next; nil if absent (optional ones).
        func header(_ key: String, required: Bool) throws(SyncError) -> JSONValue? {
            if index < elements.count, case .object(let object) = elements[index], object.count == 1, let value = object[key] {
                index += 1
                return value
            }
            if required { throw Self.violation("the page has no '\(key)' header element where it belongs") }
            return nil
        }
        // The protocol's types: a header element of another (`{"count":"1"}`, `{"token":5}`)
        // is no page, and nothing of it is applied (a black-box probe).
        func integer(_ key: String, _ value: JSONValue?) throws(SyncError) -> Int? {
            switch value {
            case nil: return nil
            case .int(let number)?: return Int(exactly: number)
            default: throw Self.violation("the page's '\(key)' is not a number")
            }
        }
        let version = try integer("version", header("version", required: true))
        guard version == Self.version else {
            throw SyncError(.versionMismatch, "the server sent a page of version \(version.map(String.init) ?? "?"), not \(Self.version)")
        }
        switch try header("token", required: true) {
        case .string(let text)?:
            // A token is a 64-bit number's decimal text; one far longer would go in every later
            // query's URL, refused there (414) until a client reset (a black-box probe).
            guard text.utf8.count <= Self.maximumTokenLength else {
                throw Self.violation("the page's 'token' is \(text.utf8.count) characters long, not a number's text")
            }
            token = text.isEmpty ? nil : text
        default: throw Self.violation("the page's 'token' is not a string")
        }
        if search {
            guard case .string(let name)? = try header("source", required: true) else { throw Self.violation("the page's 'source' is not a string") }
            source = name
        }
        count = try integer("count", header("count", required: true)) ?? 0
        _ = try integer("refresh_time", header("refresh_time", required: false))
        _ = try integer("progress_count", header("progress_count", required: false))
        totalCount = try integer("total_count", header("total_count", required: false))
        switch index < elements.count ? elements[index] : nil {
        case nil: command = JSONObject()
        case .object(let object)?:
            command = object
            index += 1
        default: throw Self.violation("the page's command is not a JSON object")
        }
        guard index == elements.count else { throw Self.violation("the page has \(elements.count - index) element(s) after its command") }
    }

    static func violation(_ message: String) -> SyncError { SyncError(.protocolViolation, message) }

    // MARK: - As a pull page

    /// The page in the engine's terms, values read for `model`.
    func pullPage(for model: ModelDefinition) throws(SyncError) -> PullPage {
        let inserts = try objects("insert")
        let deletes = try objects("delete")
        // `count` is the objects of `insert` and `delete`: a page that counts more than it holds
        // lost them on the way, and acknowledging it would lose them for good (a black-box probe).
        guard count <= inserts.count + deletes.count else {
            throw Self.violation("the page counts \(count) object(s) and holds \(inserts.count + deletes.count); nothing of it was applied")
        }
        var page = PullPage(nextCursor: token.map(JSONValue.string), done: token == nil, totalCount: totalCount)
        for (id, attributes) in inserts {
            page.upserts.append(try Self.serverObject(id, attributes, model: model))
            // An attribute that comes as `name-rhoblob` is a blob attribute of the model from
            // now on: a local change of it is sent as a file, not as this store's reference.
            for name in attributes.keys where name.hasSuffix("-rhoblob") {
                let attribute = Self.blobName(name)
                if attribute != name, !model.blobAttributes.contains(attribute), !page.schema.blobAttributes.contains(attribute) {
                    page.schema.blobAttributes.append(attribute)
                }
            }
        }
        // A changed value is listed under both: its old value under `delete`, the new one under
        // `insert`. Only what `insert` does not set is removed. An object all of whose
        // attributes are listed is removed with them (the engine sees that).
        let inserted = Dictionary(inserts, uniquingKeysWith: { _, last in last })
        for (id, attributes) in deletes {
            let set = inserted[id]
            let names = attributes.keys.map { Self.blobName($0) }.filter { set?[$0] == nil && set?["\($0)-rhoblob"] == nil }
            if !names.isEmpty { page.removals[id] = names }
        }
        switch command["links"] {
        case nil: break
        case .object(let links)?:
            for (local, link) in links {
                guard case .object(let target) = link, case .string(let server)? = target["l"], !server.isEmpty else {
                    throw Self.violation("link of '\(local)' has no 'l' id")
                }
                page.links[local] = server
            }
        default: throw Self.violation("'links' is not a JSON object")
        }
        if let metadata = command["metadata"] {
            guard case .string(let text) = metadata else { throw Self.violation("'metadata' is not a string") }
            page.metadata = (try? JSONValue(parsing: text.utf8, maximumValues: AnswerLimits().maximumValues)) ?? metadata
        }
        switch command["schema-changed"] {
        case nil: break
        case .string(let flag)?: page.schemaChanged = flag == "true"
        case .bool(let flag)?: page.schemaChanged = flag
        default: throw Self.violation("'schema-changed' is not \"true\"")
        }
        if let error = command["source-error"] { page.sourceError = try Self.sourceError(error) }
        let rollbacks = Dictionary(try objects("update-rollback"), uniquingKeysWith: { _, last in last })
        for kind in [PendingChange.Kind.create, .update, .delete] {
            for error in try refusedChanges(kind, model: model.name) {
                var error = error
                error.attributes = try RhoConnectValues.incoming(error.attributes, of: model)
                if kind == .update, let copy = rollbacks[error.objectID] {
                    // An empty copy is no object: the server has none under this id (an object
                    // without attributes does not exist), as after a delete this client's
                    // pull missed (a black-box probe: retry then looped on "not found").
                    // Read as a page's object is (a black-box probe: `image-rhoblob` and its URL were
                    // taken as a plain attribute, which a rollback wrote): a blob's URL is
                    // downloaded by the engine.
                    if copy.isEmpty {
                        error.serverDeleted = true
                    } else {
                        error.serverCopy = try Self.serverObject(error.objectID, copy, model: model).attributes
                    }
                }
                page.refusals.append(error)
            }
        }
        return page
    }

    /// The server object for `insert` attributes: `name-rhoblob` attributes, and declared blob
    /// attributes, carry URLs to download.
    static func serverObject(_ id: String, _ attributes: JSONObject, model: ModelDefinition) throws(SyncError) -> ServerObject {
        var plain = JSONObject()
        var urls: [String: String] = [:]
        for (name, value) in attributes {
            let attribute = blobName(name)
            if attribute != name || model.blobAttributes.contains(attribute), case .string(let url) = value, !url.isEmpty {
                urls[attribute] = url
                plain[attribute] = value
            } else {
                do {
                    plain[attribute] = try RhoConnectValues.incoming(value, attribute: attribute, of: model)
                } catch {
                    throw SyncError(error.code, "object '\(id)': \(error.message)")
                }
            }
        }
        return ServerObject(id: id, attributes: plain, isWhole: false, blobURLs: urls, valuesAsText: true)
    }

    /// `image-rhoblob` → `image`; other names as they are.
    static func blobName(_ name: String) -> String {
        name.hasSuffix("-rhoblob") && name.count > 8 ? String(name.dropLast(8)) : name
    }

    /// The `{id: {attribute: value}}` section `key`, in the server's order.
    func objects(_ key: String) throws(SyncError) -> [(String, JSONObject)] {
        guard let section = command[key] else { return [] }
        guard case .object(let objects) = section else { throw Self.violation("'\(key)' is not a JSON object") }
        var result: [(String, JSONObject)] = []
        for (id, value) in objects {
            guard case .object(let attributes) = value else { throw Self.violation("'\(key)' of '\(id)' is not a JSON object") }
            result.append((id, attributes))
        }
        return result
    }

    /// `create-error`, `update-error` or `delete-error`: `{id: {attributes}, "id-error":
    /// {"message": …}}`.
    func refusedChanges(_ kind: PendingChange.Kind, model: String) throws(SyncError) -> [RefusedChange] {
        let key = "\(kind.rawValue)-error"
        guard let section = command[key] else { return [] }
        guard case .object(let entries) = section else { throw Self.violation("'\(key)' is not a JSON object") }
        var errors: [RefusedChange] = []
        for (id, value) in entries {
            // "42-error" is the message of object 42, when object 42 is there too.
            if id.hasSuffix("-error"), entries.contains(String(id.dropLast(6))) { continue }
            guard case .object(let attributes) = value else { throw Self.violation("'\(key)' of '\(id)' is not a JSON object") }
            var message = "the server refused the \(kind.rawValue)"
            if case .object(let detail)? = entries["\(id)-error"], case .string(let text)? = detail["message"] { message = text }
            errors.append(RefusedChange(model: model, objectID: id, kind: kind, message: message, attributes: attributes))
        }
        return errors
    }

    /// `{"query-error": {"message": "…"}}` → "query-error: …".
    static func sourceError(_ value: JSONValue) throws(SyncError) -> String {
        guard case .object(let errors) = value else { throw violation("'source-error' is not a JSON object") }
        return errors.map { name, detail in
            if case .object(let detail) = detail, case .string(let message)? = detail["message"] { "\(name): \(message)" } else { name }
        }.joined(separator: "; ")
    }
}
