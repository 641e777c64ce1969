import Satchel

/// `JSONValue(parsing:)` on arbitrary bytes. What it accepts must come back identical from the
/// writer's output (the stored form of every object), and hash alike.
enum JSONTarget {
    /// The parse, and the round trip of what it accepts.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        [
            .of("json.parse") {
                let value = try JSONValue(parsing: bytes)
                let written = value.jsonBytes
                guard let again = try? JSONValue(parsing: written) else {
                    return "the writer's output does not parse: \(String(decoding: written.prefix(200), as: UTF8.self))"
                }
                guard again.isIdentical(to: value), again.hashValue == value.hashValue else {
                    return "the value changed on its way through the writer: \(String(decoding: written.prefix(200), as: UTF8.self))"
                }
                return nil
            }
        ]
    }
}
