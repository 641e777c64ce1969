import Foundation

/// What a repair of one partition's database found lost (what ``LevelDB/repair(path:options:)``
/// returns), kept on disk from the moment it is
/// found until the repair of the whole store has reported it: the repair rewrites the files that
/// showed the damage, so a repair killed after that, and run again, would find nothing and say
/// `ok` (a black-box probe). The next repair reads the file and reports what it holds too.
///
/// Stored as `repair-findings` in the partition's directory (LevelDB leaves files whose names
/// are not its own alone): a JSON object `{"log": damage?, "missing": damage?, "setAside":
/// [file, …]}`, written whole (``ReplacingFile``) and synced.
struct RepairFindings: Equatable {
    static let fileName = "repair-findings"

    /// LevelDB's account of a damaged log.
    var logDamage: String?
    /// LevelDB's account of tables the manifest names that are gone.
    var tablesMissing: String?
    /// Tables set aside in the partition's `lost` directory.
    var setAside: [String] = []

    var isEmpty: Bool { logDamage == nil && tablesMissing == nil && setAside.isEmpty }

    /// What an earlier, unfinished repair of the database at `directory` found (empty when none).
    static func read(in directory: String) -> RepairFindings {
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName),
            let object = try? JSONObject(parsing: Array(data))
        else { return RepairFindings() }
        return RepairFindings(
            logDamage: object["log"]?.stringValue, tablesMissing: object["missing"]?.stringValue,
            setAside: object["setAside"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// Writes these findings for the database at `directory`, durably.
    func write(in directory: String) throws(SatchelError) {
        var object = JSONObject()
        if let logDamage { object["log"] = .string(logDamage) }
        if let tablesMissing { object["missing"] = .string(tablesMissing) }
        if !setAside.isEmpty { object["setAside"] = .array(setAside.map(JSONValue.string)) }
        let file = try ReplacingFile(path: directory + "/" + Self.fileName)
        try file.write(Data(object.jsonBytes))
        try file.commit()
    }

    /// Removes the findings of the database at `directory`, once reported.
    static func remove(in directory: String) { try? FileManager.default.removeItem(atPath: directory + "/" + fileName) }
}
