import Foundation

/// The org's users and OAuth tokens: `POST /services/oauth2/token` (password and refresh-token
/// grants), `/services/oauth2/userinfo`, `/services/oauth2/revoke`, and the bearer check of
/// every `/services/data/vXX.X/` call.
///
/// Access tokens look like Salesforce's (`00D…!AQ…`); refresh tokens outlive them:
/// ``expireAccessTokens()`` ends every access token but leaves refresh tokens working.
struct Sessions {
    static let orgID = "00DQy0000000001"

    /// Username → password.
    private let passwords: [String: String]
    /// Username → user id (`005…`).
    private(set) var userIDs: [String: String] = [:]
    /// Access token → username.
    private var accessTokens: [String: String] = [:]
    /// Refresh token → username.
    private var refreshTokens: [String: String] = [:]
    /// Username → the token ``token(for:)`` hands out.
    private var handed: [String: String] = [:]

    init(users: [String: String]) {
        passwords = users
        for (index, user) in users.keys.sorted().enumerated() {
            userIDs[user] = SalesforceID.make(prefix: "005", number: index + 1)
            handed[user] = mint(user)
        }
    }

    /// A valid access token for `user` (the same one each time while it lasts, a new one after
    /// ``expireAccessTokens()``), as an app that already holds one has it.
    mutating func token(for user: String) -> String {
        if let token = handed[user], accessTokens[token] != nil { return token }
        let token = mint(user)
        handed[user] = token
        return token
    }

    mutating func expireAccessTokens() { accessTokens.removeAll() }

    /// Whether a refresh answers with a new refresh token, ending the one it took (the
    /// connected app's refresh token rotation).
    var rotatesRefreshTokens = false

    /// The user a `Authorization: Bearer <token>` (or the older `OAuth <token>`) header names.
    func user(authorization: String?) -> String? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2, ["bearer", "oauth"].contains(parts[0].lowercased()) else { return nil }
        return accessTokens[parts[1].trimmingCharacters(in: .whitespaces)]
    }

    private mutating func mint(_ user: String) -> String {
        let token = Self.orgID + "!AQ" + Self.random(48)
        accessTokens[token] = user
        return token
    }

    private static func random(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._")
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
    }

    // MARK: - Endpoints

    /// `POST /services/oauth2/token`, form-encoded (parameters in the URL are read too).
    /// `client_id` and `client_secret` are accepted and not checked.
    mutating func tokenEndpoint(_ form: [String: String], root: String, now: Int64) -> Answer {
        let user: String
        var refresh: String?
        switch form["grant_type"] {
        case "password":
            guard let name = form["username"], let password = passwords[name], form["password"] == password else {
                return Self.oauthError("invalid_grant", "authentication failure")
            }
            user = name
            let token = Self.random(64)
            refreshTokens[token] = name
            refresh = token
        case "refresh_token":
            guard let token = form["refresh_token"], let name = refreshTokens[token] else {
                return Self.oauthError("invalid_grant", "expired access/refresh token")
            }
            user = name
            if rotatesRefreshTokens {
                // Refresh token rotation: the old one ends, a new one comes with the answer.
                refreshTokens[token] = nil
                let next = Self.random(64)
                refreshTokens[next] = name
                refresh = next
            }
        default:
            return Self.oauthError("unsupported_grant_type", "grant type not supported")
        }
        let access = mint(user)
        var json: JSONObject = ["access_token": .string(access)]
        if let refresh { json["refresh_token"] = .string(refresh) }
        json["signature"] = .string(Data(Self.random(32).utf8).base64EncodedString())
        json["scope"] = .string(refresh == nil ? "api" : "refresh_token api")
        json["instance_url"] = .string(root)
        json["id"] = .string("\(root)/id/\(Self.orgID)AAA/\(userIDs[user] ?? "")")
        json["token_type"] = .string("Bearer")
        json["issued_at"] = .string(String(now))
        return .json(.object(json))
    }

    /// `GET /services/oauth2/userinfo`: who the token is (403 `Bad_OAuth_Token`, as text, when
    /// it is no token).
    func userInfo(authorization: String?, root: String) -> Answer {
        guard let user = user(authorization: authorization) else {
            return Answer(status: 403, contentType: "text/plain;charset=UTF-8", body: Data("Bad_OAuth_Token".utf8))
        }
        let id = userIDs[user] ?? ""
        let json: JSONObject = [
            "sub": .string("\(root)/id/\(Self.orgID)AAA/\(id)"), "user_id": .string(id),
            "organization_id": .string(Self.orgID + "AAA"), "preferred_username": .string(user), "nickname": .string(user),
            "name": .string(user), "email": .string("\(user)@example.com"), "email_verified": .bool(true),
            "zoneinfo": .string("GMT"), "locale": .string("en_US"), "active": .bool(true), "user_type": .string("STANDARD"),
        ]
        return .json(.object(json))
    }

    /// `POST /services/oauth2/revoke` `token=…`: an access token ends; a refresh token ends
    /// with every access token of its user.
    mutating func revoke(_ form: [String: String]) -> Answer {
        guard let token = form["token"] else { return Self.oauthError("unsupported_token_type", "this token type is not supported") }
        if let user = refreshTokens.removeValue(forKey: token) {
            accessTokens = accessTokens.filter { $0.value != user }
        } else if accessTokens.removeValue(forKey: token) == nil {
            return Self.oauthError("invalid_token", "invalid token")
        }
        return Answer(status: 200, contentType: "", body: Data())
    }

    private static func oauthError(_ error: String, _ description: String) -> Answer {
        .json(.object(["error": .string(error), "error_description": .string(description)]), status: 400)
    }
}
