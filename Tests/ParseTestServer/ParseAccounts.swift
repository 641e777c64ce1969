import Foundation

/// Users and sessions: `/login`, `/logout`, `/users/me`, sign-up and the user's own updates.
/// Users are `_User` objects (with `username`); their passwords are kept apart and never shown.
/// A session token is `r:` and 32 hex digits; there are no roles and no email logins.
extension ParseState {
    /// `POST /login` (JSON body) or `GET /login?username=…&password=…`.
    mutating func login(_ parameters: [String: JSON]) throws(ParseError) -> Reply {
        guard let username = parameters["username"]?.string, !username.isEmpty else {
            throw ParseError(200, "username/email is required.")
        }
        guard let password = parameters["password"]?.string, !password.isEmpty else {
            throw ParseError(201, "password is required.")
        }
        guard let user = user(named: username), let id = user["objectId"]?.string, passwords[id] == password else {
            throw .objectNotFound("Invalid username/password.")
        }
        return Reply(json: withSession(user, token: newSession(for: id)))
    }

    /// `POST /logout`: the session is gone; `{}` even without one.
    mutating func logout(_ caller: Caller) -> Reply {
        if let token = caller.token { sessions[token] = nil }
        return Reply(json: .object([:]))
    }

    /// `GET /users/me`: the session's user, with its token.
    func me(_ caller: Caller) throws(ParseError) -> Reply {
        guard let id = caller.user, let token = caller.token, let user = store.object("_User", id) else {
            throw .invalidSessionToken
        }
        return Reply(json: withSession(user, token: token))
    }

    /// `POST /users` (or `/classes/_User`): a new user, logged in.
    mutating func signUp(_ body: [String: JSON]) throws(ParseError) -> Reply {
        guard let username = body["username"]?.string, !username.isEmpty else { throw ParseError(200, "bad or missing username") }
        guard let password = body["password"]?.string, !password.isEmpty else { throw ParseError(201, "password is required") }
        guard user(named: username) == nil else { throw ParseError(202, "Account already exists for this username.") }
        if body["objectId"] != nil { throw .invalidKeyName("objectId is an invalid field name.") }
        var fields = body
        fields["password"] = nil
        try checkRules("create", "_User", id: nil, fields: fields)
        var response = try store.write("_User", .create(id: nil), body: fields).object ?? [:]
        let id = response["objectId"]?.string ?? ""
        passwords[id] = password
        response["sessionToken"] = .string(newSession(for: id))
        return Reply(json: .object(response), status: 201, headers: ["Location": "\(root)\(mount)/users/\(id)"])
    }

    /// `PUT /users/ID`: only the user's own session may change it (a new `password` included).
    mutating func updateUser(_ id: String, _ body: [String: JSON], _ caller: Caller) throws(ParseError) -> Reply {
        guard caller.user == id else { throw ParseError(206, "Cannot modify user \(id).") }
        if let username = body["username"]?.string, let other = user(named: username), other["objectId"]?.string != id {
            throw ParseError(202, "Account already exists for this username.")
        }
        var fields = body
        fields["password"] = nil
        try checkRules("update", "_User", id: id, fields: fields)
        let response = try store.write("_User", .update(id), body: fields)
        if let password = body["password"]?.string { passwords[id] = password }
        return Reply(json: response)
    }

    private func user(named username: String) -> [String: JSON]? {
        store.objects("_User").first { $0["username"]?.string == username }
    }

    private mutating func newSession(for id: String) -> String {
        let token = "r:" + (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        sessions[token] = id
        return token
    }

    private func withSession(_ user: [String: JSON], token: String) -> JSON {
        var shown = view(Caller()).present(user).object ?? [:]
        shown["sessionToken"] = .string(token)
        return .object(shown)
    }
}
