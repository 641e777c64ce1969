import Foundation
import LoopbackSupport

/// `GET /query?q=SOQL`, `GET /queryAll?q=SOQL` (deleted records too, `IsDeleted` true) and
/// `GET <nextRecordsUrl>`:
///
/// ```json
/// {"totalSize":3,"done":false,"nextRecordsUrl":"/services/data/v59.0/query/01gQy0000000001AAA-2",
///  "records":[{"attributes":{"type":"Account","url":"/services/data/v59.0/sobjects/Account/001…"},"Id":"001…","Name":"Acme"}]}
/// ```
///
/// A page holds the server's page size (``SalesforceServer/setQueryPageSize(_:)``), or fewer
/// when the request's `Sforce-Query-Options: batchSize=N` (200…2000) asks for fewer. The rows
/// are fixed when the query runs: later writes do not move them between pages.
extension SalesforceState {
    mutating func query(_ call: Call, all: Bool) throws(APIError) -> Answer {
        guard let text = call.request.query["q"], !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw .malformedQuery("A query string has to be specified")
        }
        var parser = try SOQLParser(text)
        let plan = try SOQLPlan(try parser.parse(), store: store)
        let rows = plan.run(store.rows(plan.schema.name, deleted: all))
        if plan.count {
            return .json(.object(["totalSize": .int(Int64(rows.count)), "done": .bool(true), "records": .array([])]))
        }
        let records = rows.map { row in
            var record = store.render(plan.schema, row.id, row.fields, fields: plan.fields, version: call.version)
            for related in plan.related {
                guard let parentID = row.fields[related.reference.name]?.string, let parent = store.record(related.target.name, parentID) else {
                    record[related.relationship] = .null
                    continue
                }
                // Fields of one parent come in one object: `attributes`, then each in SELECT order.
                var nested = record[related.relationship]?.object ?? store.render(related.target, parentID, [:], fields: [], version: call.version)
                nested[related.field.name] = parent.fields[related.field.name] ?? .null
                record[related.relationship] = .object(nested)
            }
            return JSON.object(record)
        }
        var size = pageSize
        if let options = call.request.headers["sforce-query-options"],
            let batch = options.split(separator: ",").compactMap({ option -> Int? in
                let pair = option.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
                return pair.count == 2 && pair[0].lowercased() == "batchsize" ? Int(pair[1]) : nil
            }).first
        {
            size = min(size, min(max(batch, 200), 2000))
        }
        size = max(size, 1)
        guard records.count > size else { return page(records, from: 0, size: size, locator: nil, version: call.version) }
        cursorCount += 1
        let locator = String(SalesforceID.make(prefix: "01g", number: cursorCount).prefix(15)) + "AAA"
        cursors[locator] = Cursor(records: records, pageSize: size)
        return page(records, from: 0, size: size, locator: locator, version: call.version)
    }

    /// `GET /query/<locator>-<offset>`.
    func nextPage(_ name: String, _ call: Call) throws(APIError) -> Answer {
        guard let dash = name.lastIndex(of: "-"), let from = Int(name[name.index(after: dash)...]), from >= 0,
            let cursor = cursors[String(name[..<dash])], from <= cursor.records.count
        else {
            throw APIError(400, "INVALID_QUERY_LOCATOR", "invalid query locator")
        }
        return page(cursor.records, from: from, size: cursor.pageSize, locator: String(name[..<dash]), version: call.version)
    }

    private func page(_ records: [JSON], from: Int, size: Int, locator: String?, version: String) -> Answer {
        let end = min(records.count, from + size)
        var json: JSONObject = ["totalSize": .int(Int64(records.count)), "done": .bool(end >= records.count)]
        if end < records.count, let locator { json["nextRecordsUrl"] = .string("/services/data/v\(version)/query/\(locator)-\(end)") }
        json["records"] = .array(Array(records[from..<end]))
        return .json(.object(json))
    }
}
