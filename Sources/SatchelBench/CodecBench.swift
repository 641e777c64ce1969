import Foundation
import Satchel

/// Satchel's JSON codec against Foundation's on the benchmark objects, in the same process:
/// decoding compact JSON into an object value, and encoding it back with sorted keys.
enum CodecBench {
    /// The Codable twin of a benchmark object, for JSONDecoder/JSONEncoder.
    struct Product: Codable {
        var name: String
        var brand: String
        var price: Int64
        var quantity: Int64
        var sku: String
        var category: String
        var created: String
        var description: String
    }

    static func run(count: Int) throws {
        let items = BenchData.make(count: count)
        let texts = items.map { $0.attributes.jsonBytes }
        let datas = texts.map { Data($0) }
        let bytes = texts.reduce(0) { $0 + $1.count }
        FileHandle.standardError.write(Data("codec: \(count) objects, \(bytes / count) bytes on average\n".utf8))

        var sink = 0
        let satchelDecode = try Report.seconds {
            for text in texts { sink &+= try JSONObject(parsing: text).count }
        }
        let serializationDecode = try Report.seconds {
            for data in datas { sink &+= (try JSONSerialization.jsonObject(with: data) as! [String: Any]).count }
        }
        let decoder = JSONDecoder()
        let codableDecode = try Report.seconds {
            for data in datas { sink &+= Int(try decoder.decode(Product.self, from: data).price) }
        }
        Report.line(
            "json_decode", n: count, satchel: Double(count) / satchelDecode, unit: "docs/s",
            baselines: [
                ("foundation_jsonserialization", Double(count) / serializationDecode), ("foundation_jsondecoder", Double(count) / codableDecode),
            ])

        // Documents into structs: Satchel's parser and JSONValueDecoder against JSONDecoder, on
        // the same bytes; interleaved rounds, each system's best.
        let valueDecoder = JSONValueDecoder()
        var ours = Double.infinity, theirs = Double.infinity
        for _ in 0..<3 {
            ours = min(
                ours,
                try Report.seconds {
                    for text in texts { sink &+= Int(try valueDecoder.decode(Product.self, from: .object(try JSONObject(parsing: text))).price) }
                })
            theirs = min(
                theirs,
                try Report.seconds {
                    for data in datas { sink &+= Int(try decoder.decode(Product.self, from: data).price) }
                })
        }
        Report.line(
            "struct_decode", n: count, satchel: Double(count) / ours, unit: "docs/s", baselines: [("foundation_jsondecoder", Double(count) / theirs)])

        let objects = items.map(\.attributes)
        let dictionaries = try datas.map { try JSONSerialization.jsonObject(with: $0) as! [String: Any] }
        let structs = try datas.map { try decoder.decode(Product.self, from: $0) }
        let satchelEncode = Report.seconds {
            for object in objects { sink &+= object.jsonBytes.count }
        }
        let serializationEncode = try Report.seconds {
            for dictionary in dictionaries { sink &+= try JSONSerialization.data(withJSONObject: dictionary, options: [.sortedKeys]).count }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let codableEncode = try Report.seconds {
            for value in structs { sink &+= try encoder.encode(value).count }
        }
        Report.line(
            "json_encode", n: count, satchel: Double(count) / satchelEncode, unit: "docs/s",
            baselines: [
                ("foundation_jsonserialization", Double(count) / serializationEncode), ("foundation_jsonencoder", Double(count) / codableEncode),
            ])
        if sink == 42 { print("") }  // keeps the work observable
    }
}
