import Satchel
import SatchelRhoConnect
import SatchelSync

/// RhoConnect answers: a query page (a pull) read for a schemaless model and for a typed one
/// (whose string values are read as their declared types), and a search answer.
enum RhoConnectTarget {
    /// A property-bag model: values stay the strings they arrive as.
    static let schemaless = ModelDefinition(name: "Product")
    /// A fixed-schema model of every attribute type, with a blob: strings are read as the
    /// declared types.
    static let typed = ModelDefinition(
        name: "Product",
        kind: .fixedSchema([
            "name": .string, "brand": .string, "price": .number, "n": .integer, "ok": .boolean, "tags": .array, "meta": .object,
            "image": .string,
        ]),
        blobAttributes: ["image"])

    /// The bytes as a query page, for both models, and as a search answer.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let query = Answers.response(bytes, url: "http://127.0.0.1:9292/app/v1/Product")
        let search = Answers.response(bytes, url: "http://127.0.0.1:9292/rc/v1/app/search")
        return [
            .of("rhoconnect.pull") {
                _ = try RhoConnectBackend.queryPage(query, model: schemaless)
                return nil
            },
            .of("rhoconnect.typed") {
                _ = try RhoConnectBackend.queryPage(query, model: typed)
                return nil
            },
            .of("rhoconnect.search") {
                _ = try RhoConnectBackend.searchAnswer(search, model: schemaless)
                return nil
            },
        ]
    }
}
