import Foundation
import Satchel
import SatchelKinto
import SatchelSync
import SatchelSyncTesting
import Synchronization

/// The real Kinto server as a conformance server: each scenario gets its own bucket, owned by
/// an administrator. The device's user may read the bucket and create records in the kit's
/// collections, and may write the records it creates, and those the administrator puts, through
/// a group per record (`/buckets/B/groups/w-ID`, the device its member). So the administrator
/// can refuse the device's changes as a real deployment would, with a 403: a create by holding
/// the id already (a record the device may not write), an update or a delete by taking the
/// device out of the record's group (which, unlike a change of the record's permissions, leaves
/// the record's `last_modified` alone).
struct KintoHarness: ConformanceHarness {
    static let admin = Credentials(user: "satchel-admin", password: "admin-secret")

    func makeServer() async throws -> any ConformanceServer {
        let url = try KintoServers.main()
        let bucket = KintoServers.unique("kit")
        let device = Credentials(user: KintoServers.unique("device"), password: "device-secret")
        let other = Credentials(user: KintoServers.unique("other"), password: "other-secret")
        let admin = KintoAdmin(url, Self.admin)
        let principal = try await KintoAdmin(url, device).principal()
        let otherPrincipal = try await KintoAdmin(url, other).principal()
        let readers: [JSONValue] = [.string(principal), .string(otherPrincipal)]
        try await admin.call("PUT", "buckets/\(bucket)", ["data": [:], "permissions": ["read": .array(readers)]])
        for model in ["Product", "Customer", "Order", "Photo"] {
            try await admin.call(
                "PUT", "buckets/\(bucket)/collections/\(model)", ["data": [:], "permissions": ["record:create": .array(readers)]])
        }
        return KintoConformanceServer(url: url, bucket: bucket, device: device, other: other, principal: principal, admin: admin)
    }
}

final class KintoConformanceServer: ConformanceServer {
    let url: URL
    let bucket: String
    let device: Credentials
    let other: Credentials
    let principal: String
    let admin: KintoAdmin
    /// Refusals in force: ids held for refused creates, ids whose write permission was taken.
    private let refused = Mutex<(creates: [(String, String)], writes: [(String, String)])>(([], []))

    /// Marks the records that hold an id for a refused create (not the device's objects).
    static let placeholder = "satchelRefusedCreate"

    init(url: URL, bucket: String, device: Credentials, other: Credentials, principal: String, admin: KintoAdmin) {
        self.url = url
        self.bucket = bucket
        self.device = device
        self.other = other
        self.principal = principal
        self.admin = admin
    }

    var backend: any SyncBackend { KintoBackend(configuration: .init(url: url, bucket: bucket, timeout: 30, credentials: device)) }
    var credentials: Credentials { device }
    /// A second user who may read the bucket and create records.
    var otherCredentials: Credentials { other }
    var detectsConflicts: Bool { true }

    func record(_ model: String, _ id: String) -> String { admin.records(bucket, model) + "/" + KintoMapping.recordID(id) }

    func put(_ model: String, _ attributes: JSONObject, id: String?) async throws -> String {
        let id = id ?? KintoServers.unique("srv")
        try await admin.call("PUT", group(model, id), ["data": ["members": [.string(principal)]]])
        let writers = "/" + group(model, id)
        try await admin.call(
            "PUT", record(model, id), ["data": .object(KintoMapping.data(attributes)), "permissions": ["write": [.string(writers)]]])
        return id
    }

    /// The group whose members may write record `id` of `model`.
    func group(_ model: String, _ id: String) -> String {
        "buckets/\(bucket)/groups/w-\(KintoMapping.recordID(model))-\(KintoMapping.recordID(id))"
    }

    func update(_ model: String, _ id: String, _ changes: JSONObject) async throws {
        try await admin.call("PATCH", record(model, id), ["data": .object(KintoMapping.data(changes))])
    }

    func delete(_ model: String, _ id: String) async throws { try await admin.call("DELETE", record(model, id)) }

    /// The live records, as the device stores them: a record's attachment (the plugin's field
    /// `attachment`) is the model's blob attribute, and its value the file's URL.
    func objects(_ model: String) async throws -> [String: JSONObject] {
        let blobAttribute = model == SyncConformance.photo.name ? SyncConformance.photo.blobAttributes.first : nil
        return try await admin.objects(bucket, model).filter { $0.value[Self.placeholder] == nil }.mapValues { attributes in
            guard let blobAttribute, let location = attributes["attachment"]?["location"]?.stringValue else { return attributes }
            var mapped = attributes
            mapped["attachment"] = nil
            mapped[blobAttribute] = .string(location)
            return mapped
        }
    }

    /// The record's `data` as Kinto stores it, less `id` and `last_modified`.
    func storedObject(_ model: String, _ id: String) async throws -> JSONObject? {
        let answer = try await admin.raw("GET", record(model, id))
        if answer.status == 404 { return nil }
        guard answer.status == 200, let data = try JSONValue(parsing: answer.body)["data"]?.objectValue else {
            throw SyncError(.server, "reading record \(id) of \(model): HTTP \(answer.status) \(answer.text)")
        }
        return data.filter { name, _ in name != "id" && name != "last_modified" }
    }

    /// Kinto registers no clients.
    func clientCount() async throws -> Int? { nil }

    func refuse(_ kind: PendingChange.Kind, model: String, id: String) async throws {
        if kind == .create {
            try await admin.call("PUT", record(model, id), ["data": [.init(Self.placeholder): true]])
            refused.withLock { $0.creates.append((model, id)) }
        } else {
            try await admin.call("PATCH", group(model, id), ["data": ["members": []]])
            refused.withLock { $0.writes.append((model, id)) }
        }
    }

    func allowAll() async throws {
        let (creates, writes) = refused.withLock { state in
            defer { state = ([], []) }
            return state
        }
        for (model, id) in creates { try await admin.call("DELETE", record(model, id)) }
        for (model, id) in writes {
            try await admin.call("PATCH", group(model, id), ["data": ["members": [.string(principal)]]])
        }
    }

    func shutdown() async throws { _ = try await admin.raw("DELETE", "buckets/\(bucket)") }

    /// Uploads the file as the record's attachment (the plugin keeps one per record), or deletes
    /// it, as the administrator.
    func putBlob(_ model: String, _ id: String, _ attribute: String, _ data: Data?) async throws {
        if let data {
            try await admin.attach(record(model, id), data, filename: "\(attribute).jpg")
        } else {
            try await admin.call("DELETE", record(model, id) + "/attachment")
        }
    }

    /// The bytes of the file the record's attachment names, read from the directory the plugin
    /// writes to (`SATCHEL_KINTO_DIR/attachments`), not downloaded.
    func blob(_ model: String, _ id: String, _ attribute: String) async throws -> Data? {
        let answer = try await admin.raw("GET", record(model, id))
        if answer.status == 404 { return nil }
        guard answer.status == 200 else { throw SyncError(.server, "reading record \(id) of \(model): HTTP \(answer.status) \(answer.text)") }
        guard let location = try JSONValue(parsing: answer.body)["data"]?["attachment"]?["location"]?.stringValue else { return nil }
        return try KintoServers.attachmentFile(location)
    }
}
