public import Foundation
import Satchel
public import SatchelSync

/// Blob attributes as record attachments, through the kinto-attachment plugin: one file per
/// record, uploaded as a multipart form's field `attachment` to `…/records/ID/attachment`, named
/// by the record's field `attachment` (`location`, `filename`, `hash`, `mimetype`, `size`).
extension KintoBackend {
    /// What becomes of a record's attachment after its record's write.
    enum AttachmentChange: Sendable, Hashable {
        /// The file, named after the blob reference's content hash.
        case upload(Data, name: String)
        case remove
    }

    /// The code of a change refused because its blob attribute holds something else than a blob.
    static let notABlobCode = "notABlob"

    /// Whether `change` sets the blob attribute to something that is neither a blob reference,
    /// nor a URL (an attachment not downloaded yet, or rolled back to), nor null: Kinto keeps a
    /// file there, so the change is refused (``notABlobCode``) rather than sent without it.
    static func setsNotABlob(_ change: OutgoingChange, blobAttribute: String?) -> Bool {
        guard let blobAttribute, change.kind != .delete, let value = change.attributes[blobAttribute], !value.isNull else { return false }
        if BlobStore.isReference(value) { return false }
        guard let string = value.stringValue, let url = URL(string: string) else { return true }
        return !["http", "https"].contains(url.scheme?.lowercased() ?? "")
    }

    /// The blob attribute of `model` that is its records' attachment (nil: it declares none).
    ///
    /// - Throws: ``SyncError`` `.notSupported` for a model with several: the plugin keeps one
    ///   attachment per record.
    static func blobAttribute(of model: ModelDefinition) throws(SyncError) -> String? {
        guard model.blobAttributes.count > 1 else { return model.blobAttributes.first }
        throw SyncError(
            .notSupported,
            "\(model.name) has \(model.blobAttributes.count) blob attributes (\(model.blobAttributes.joined(separator: ", "))), but Kinto keeps one attachment per record (kinto-attachment): sync at most one"
        )
    }

    /// `change` as its record's write, without the blob attribute, and what it does to the
    /// record's attachment: a blob reference whose bytes came is uploaded, a removal removes it.
    /// Any other value of the blob attribute (a URL not downloaded yet) does not travel
    /// (``setsNotABlob(_:blobAttribute:)`` refuses what is not a URL first).
    static func split(_ change: OutgoingChange, blobAttribute: String?) -> (record: OutgoingChange, attachment: AttachmentChange?) {
        guard let blobAttribute, change.kind != .delete, let value = change.attributes[blobAttribute] else {
            var record = change
            if let blobAttribute { record.object?[blobAttribute] = nil }
            return (record, nil)
        }
        var record = change
        record.attributes[blobAttribute] = nil
        record.object?[blobAttribute] = nil
        record.blobs = [:]
        if value.isNull { return (record, change.kind == .update ? .remove : nil) }
        guard let reference = value.stringValue, BlobStore.isReference(value), let data = change.blobs[blobAttribute] else { return (record, nil) }
        return (record, .upload(data, name: String(reference.dropFirst(BlobStore.referencePrefix.count))))
    }

    /// Uploads or removes the attachment of `change`'s record, whose write was accepted: the
    /// change's outcome, with the record's version after it (the answer's `ETag`).
    func sendAttachment(_ attachment: AttachmentChange, of change: OutgoingChange, model: String) async throws -> PushOutcome {
        let what = "attachment of \(model)"
        let url = try root(collectionPath(model) + "/records/" + KintoMapping.recordID(change.objectID) + "/attachment")
        let answer: SyncHTTPClient.Response
        switch attachment {
        case .upload(let data, let name):
            // `.bin`: the plugin accepts only the extensions its `extensions` setting allows.
            let form = MultipartForm([
                MultipartForm.Part(name: "attachment", filename: name + ".bin", contentType: "application/octet-stream", data: data)
            ])
            answer = try await send("POST", url, headers: ["Content-Type": form.contentType], body: form.body, what: what)
            if (200..<300).contains(answer.status), try answer.json(what)["location"]?.stringValue == nil {
                throw SyncError(.protocolViolation, "\(what): the answer to an upload names no file (`location`)").at(url.path)
            }
        case .remove:
            answer = try await send("DELETE", url, what: what)
        }
        guard (200..<300).contains(answer.status) else {
            return try Self.outcome(of: change, status: answer.status, body: (try? answer.json("")) ?? .null, what)
        }
        // The plugin writes the record again: its new last_modified is the answer's ETag.
        let etag = answer.header("etag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        return .accepted(version: etag.flatMap { Int64($0) }.map(JSONValue.int))
    }

    /// The bytes of an attachment, from its `location`. The password goes only to the Kinto
    /// server itself: files served from elsewhere (the plugin's `base_url`, a CDN) are fetched
    /// without it.
    public func downloadBlob(_ url: String, session: SyncSession) async throws -> Data {
        let what = "attachment download"
        guard let target = URL(string: url), ["http", "https"].contains(target.scheme?.lowercased() ?? ""), target.host != nil else {
            throw SyncError(.protocolViolation, "\(what): the attachment's location is not an http(s) URL (\(url.prefix(200)))")
        }
        let limit = configuration.limits.maximumDownloadBytes
        let headers = ["Accept": "*/*"]
        let answer =
            if SyncHTTPClient.sameOrigin(target, configuration.url) {
                try await send("GET", target, headers: headers, maximumBytes: limit, what: what)
            } else {
                try await http.send("GET", target, headers: headers, maximumBytes: limit)
            }
        guard (200..<300).contains(answer.status) else {
            throw SyncError(.server, "\(what) failed with HTTP \(answer.status)", httpStatus: answer.status, retryAfter: answer.retryAfter).at(
                target.path)
        }
        return answer.body
    }
}
