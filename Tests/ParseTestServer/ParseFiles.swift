import Foundation
import LoopbackSupport

/// Files: `POST /files/NAME` stores the raw body under a new unique name, and
/// `GET /files/<appID>/<name>` serves it without any header, as Parse Server's files router does.
extension ParseState {
    /// `POST /files/NAME`: 201 `{"name":"<32 hex>_NAME","url":…}` with the url in `Location`.
    mutating func upload(_ name: String, _ request: ParseServer.Request) -> Answer {
        guard name.count <= 128 else { return .error(ParseError(122, "Filename too long.")) }
        guard Self.isValidFileName(name) else { return .error(ParseError(122, "Filename contains invalid characters.")) }
        guard !request.body.isEmpty else { return .error(ParseError(130, "Invalid file upload.")) }
        let stored = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() + "_" + name
        files[stored] = (request.body, request.headers["content-type"] ?? Self.contentType(of: name))
        let url = filesBase + (stored.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? stored)
        return .json(.object(["name": .string(stored), "url": .string(url)]), status: 201, headers: ["Location": url])
    }

    /// `GET /files/<appID>/<name>`: the bytes; a wrong app id is 403 code 119, a missing file
    /// Parse's plain-text 404.
    func download(appID: String, name: String) -> Answer {
        guard appID == fixture.appID else { return .error(ParseError(119, "Invalid application ID.")).withStatus(403) }
        guard let file = files[name] else { return Answer(status: 404, contentType: "text/plain", body: Data("File not found.".utf8)) }
        return Answer(contentType: file.contentType, body: file.data)
    }

    /// Parse's file names: `^[_a-zA-Z0-9][a-zA-Z0-9@. ~_-]*$`.
    static func isValidFileName(_ name: String) -> Bool {
        func plain(_ scalar: Unicode.Scalar) -> Bool {
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_")
        }
        let scalars = Array(name.unicodeScalars)
        guard let first = scalars.first, plain(first) else { return false }
        return scalars.dropFirst().allSatisfy { plain($0) || "@. ~-".unicodeScalars.contains($0) }
    }

    /// A content type from a file name's extension, for fixture files and uploads without one.
    static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last?.lowercased() {
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "pdf": "application/pdf"
        case "txt": "text/plain"
        case "json": "application/json"
        default: "application/octet-stream"
        }
    }
}

extension Answer {
    func withStatus(_ status: Int) -> Answer {
        var answer = self
        answer.status = status
        return answer
    }
}
