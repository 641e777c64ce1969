package import Foundation

/// A `multipart/form-data` body (RFC 7578): the adapters' uploads (RhoConnect's push with blobs,
/// Kinto's attachments). Package-visible, like ``SyncHTTPClient``: it is not app API.
package struct MultipartForm: Sendable {
    /// One part: a form field, or a file when it has a file name.
    package struct Part: Sendable {
        package var name: String
        package var filename: String?
        package var contentType: String
        package var data: Data

        package init(name: String, filename: String? = nil, contentType: String, data: Data) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.data = data
        }
    }

    package let boundary = "satchel-\(UUID().uuidString)"
    package let body: Data

    /// The request's `Content-Type`, naming the boundary.
    package var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    package init(_ parts: [Part]) {
        let boundary = self.boundary
        var body = Data()
        for part in parts {
            var disposition = "Content-Disposition: form-data; name=\"\(Self.quoted(part.name))\""
            if let filename = part.filename { disposition += "; filename=\"\(Self.quoted(filename))\"" }
            body.append(Self.lines("--\(boundary)", disposition, "Content-Type: \(part.contentType)", ""))
            body.append(part.data)
            body.append(Self.lines(""))
        }
        body.append(Self.lines("--\(boundary)--"))
        self.body = body
    }

    static func lines(_ lines: String...) -> Data { Data(lines.map { $0 + "\r\n" }.joined().utf8) }

    /// A name as a quoted-string: quotes and line breaks escaped as browsers do.
    static func quoted(_ name: String) -> String {
        name.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
    }
}
