import Satchel
import SatchelTestSupport

/// The benchmark's objects: like the Fixtures/ products, about 250 bytes of compact JSON, with
/// 8 attributes: name, brand (50 values), price (1–1000), quantity, a unique sku, category (20
/// values), an ISO date and a ~60-character description.
enum BenchData {
    static let brands = (0..<50).map { "Brand\($0 < 10 ? "0" : "")\($0)" }
    static let categories = (0..<20).map { "category-\($0)" }
    static let words = [
        "light", "sturdy", "quiet", "fast", "compact", "classic", "smart", "rugged", "solar", "wireless",
        "everyday", "portable", "durable", "elegant", "simple", "modern",
    ]

    struct Item {
        var id: String
        var attributes: JSONObject
    }

    static func id(_ i: Int) -> String {
        let digits = String(i)
        return "p" + String(repeating: "0", count: max(0, 9 - digits.count)) + digits
    }

    /// Objects in order, the same sequence on every run: `make` for a few, a `Generator` to
    /// stream many without holding them.
    static func make(count: Int, seed: UInt64 = 42) -> [Item] {
        var generator = Generator(seed: seed)
        return (0..<count).map { _ in generator.next() }
    }

    struct Generator {
        private var rng: SplitMix64
        private var i = 0

        init(seed: UInt64 = 42) { rng = SplitMix64(seed: seed) }

        mutating func next() -> Item {
            defer { i += 1 }
            let brand = brands.randomElement(using: &rng)!
            var description = "The \(words.randomElement(using: &rng)!) product for"
            while description.utf8.count < 68 { description += " " + words.randomElement(using: &rng)! }
            let attributes: JSONObject = [
                "name": .string("\(brand) \(words.randomElement(using: &rng)!) item \(i)"),
                "brand": .string(brand),
                "price": .int(Int64.random(in: 1...1000, using: &rng)),
                "quantity": .int(Int64.random(in: 0...500, using: &rng)),
                "sku": .string("SKU-\(String(i, radix: 36).uppercased())-\(Int.random(in: 1000...9999, using: &rng))"),
                "category": .string(categories.randomElement(using: &rng)!),
                "created": .string(
                    "20\(Int.random(in: 20...26, using: &rng))-\(pad(Int.random(in: 1...12, using: &rng)))-\(pad(Int.random(in: 1...28, using: &rng)))T\(pad(Int.random(in: 0...23, using: &rng))):\(pad(Int.random(in: 0...59, using: &rng))):00Z"
                ),
                "description": .string(description),
            ]
            return Item(id: BenchData.id(i), attributes: attributes)
        }
    }

    private static func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}
