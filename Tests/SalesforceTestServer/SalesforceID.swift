/// Salesforce record ids: 15 case-sensitive characters (a three-character key prefix naming the
/// object, then the record's own part), and the 18-character form that adds three characters
/// encoding which of the 15 are upper-case letters, so that the id survives case-insensitive
/// handling. The server answers with the 18-character form and accepts both.
enum SalesforceID {
    private static let suffixAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ012345")
    private static let base62 = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

    /// The id made of `prefix` and the number `n`: `<prefix>Qy0<9 base-62 digits><suffix>`. The
    /// digits are in ASCII order, so ids made later sort after ids made before.
    static func make(prefix: String, number n: Int) -> String {
        var digits: [Character] = []
        var rest = n
        for _ in 0..<9 {
            digits.append(base62[rest % 62])
            rest /= 62
        }
        return withSuffix(prefix + "Qy0" + String(digits.reversed()))
    }

    /// The 18-character id of a 15-character one.
    static func withSuffix(_ id15: String) -> String {
        let chars = Array(id15)
        var suffix = ""
        for chunk in 0..<3 {
            var flags = 0
            for position in 0..<5 where chars[chunk * 5 + position].isASCII && chars[chunk * 5 + position].isUppercase {
                flags |= 1 << position
            }
            suffix.append(suffixAlphabet[flags])
        }
        return id15 + suffix
    }

    /// The canonical 18-character form of `text`: a 15-character id gets its suffix; an
    /// 18-character one has its case restored from its suffix. Nil when `text` is not an id
    /// (the server's `MALFORMED_ID`).
    static func canonical(_ text: String) -> String? {
        let chars = Array(text)
        guard chars.count == 15 || chars.count == 18, chars.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return nil
        }
        if chars.count == 15 { return withSuffix(text) }
        var restored: [Character] = []
        for chunk in 0..<3 {
            guard let flags = suffixAlphabet.firstIndex(of: Character(chars[15 + chunk].uppercased())) else { return nil }
            for position in 0..<5 {
                let char = chars[chunk * 5 + position]
                let upper = flags & (1 << position) != 0
                guard !upper || char.isLetter else { return nil }
                restored.append(Character(upper ? char.uppercased() : char.lowercased()))
            }
        }
        return withSuffix(String(restored))
    }

    /// The key prefix of an id (its object).
    static func prefix(_ id: String) -> String { String(id.prefix(3)) }
}
