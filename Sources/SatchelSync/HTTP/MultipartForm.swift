import Foundation

/// A `multipart/form-data` body (RFC 7578) for a push with blobs: one file part per blob,
/// named `attribute-objectID`, then the changes as the text part `cud`.
struct MultipartForm {
    let boundary = "satchel-\(UUID().uuidString)"
    let body: Data

    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    init(files: [(part: String, file: String, data: Data)], cud: Data) {
        let boundary = self.boundary
        var body = Data()
        for file in files {
            body.append(Self.lines(
                "--\(boundary)", "Content-Disposition: form-data; name=\"\(Self.quoted(file.part))\"; filename=\"\(Self.quoted(file.file))\"",
                "Content-Type: application/octet-stream", ""))
            body.append(file.data)
            body.append(Self.lines(""))
        }
        body.append(Self.lines("--\(boundary)", "Content-Disposition: form-data; name=\"cud\"", "Content-Type: application/json", ""))
        body.append(cud)
        body.append(Self.lines("", "--\(boundary)--"))
        self.body = body
    }

    static func lines(_ lines: String...) -> Data { Data(lines.map { $0 + "\r\n" }.joined().utf8) }

    /// A name as a quoted-string: quotes and line breaks escaped as browsers do.
    static func quoted(_ name: String) -> String {
        name.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
    }
}
