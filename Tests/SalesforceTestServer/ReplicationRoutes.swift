import Foundation
import LoopbackSupport

/// The replication calls: `GET /sobjects/O/deleted/?start=&end=` (the delete log, kept 15 days)
/// and `GET /sobjects/O/updated/?start=&end=` (ids by `SystemModstamp`, 30 days).
///
/// As in Salesforce: `start` and `end` are ISO 8601 with a zone; seconds are ignored (both
/// are taken down to their minute); `start` must precede `end` by more than a minute, and may
/// not be older than `earliestDateAvailable`, else `INVALID_REPLICATION_DATE`. The window
/// covered is `[start, latestDateCovered)`, `latestDateCovered` being `end`'s minute or, when
/// `end` is in the future, the server clock's last full minute: the next call starts there.
extension SalesforceState {
    mutating func deleted(_ schema: Schema, _ call: Call) throws(APIError) -> Answer {
        let window = try replicationWindow(call, keptDays: 15)
        if deletedWindowExpired {
            throw .replicationDate(
                "startDate \(SalesforceTime.format(window.start)) is before the earliest date available: the delete log no longer covers it")
        }
        let deleted = (store.records[schema.name] ?? [:]).compactMap { id, record -> (id: String, at: Int64)? in
            guard let at = record.deletedAt, at >= window.start, at < window.latest else { return nil }
            return (id, at)
        }.sorted { ($0.at, $0.id) < ($1.at, $1.id) }
        var json = JSONObject()
        json["deletedRecords"] = .array(deleted.map { .object(["id": .string($0.id), "deletedDate": .string(SalesforceTime.format($0.at))]) })
        json["earliestDateAvailable"] = .string(SalesforceTime.format(window.earliest))
        json["latestDateCovered"] = .string(SalesforceTime.format(window.latest))
        return .json(.object(json))
    }

    func updated(_ schema: Schema, _ call: Call) throws(APIError) -> Answer {
        let window = try replicationWindow(call, keptDays: 30)
        let ids = store.rows(schema.name).filter { row in
            guard let stamp = row.fields["SystemModstamp"]?.string.flatMap(SalesforceTime.parse) else { return false }
            return stamp >= window.start && stamp < window.latest
        }.map(\.id)
        return .json(.object(["ids": .array(ids.map(JSON.string)), "latestDateCovered": .string(SalesforceTime.format(window.latest))]))
    }

    /// The window of a replication call, checked.
    private func replicationWindow(_ call: Call, keptDays: Int64) throws(APIError) -> (start: Int64, latest: Int64, earliest: Int64) {
        func date(_ name: String) throws(APIError) -> Int64 {
            guard let text = call.request.query[name], !text.isEmpty else {
                throw APIError(400, "MISSING_ARGUMENT", "\(name) not specified")
            }
            guard let instant = SalesforceTime.parse(text) else {
                throw .replicationDate("Unparseable \(name) date: \(text)")
            }
            return instant
        }
        let rawStart = try date("start")
        let rawEnd = try date("end")
        guard SalesforceTime.floorMinute(rawEnd) - SalesforceTime.floorMinute(rawStart) > SalesforceTime.minute else {
            throw .replicationDate("startDate must chronologically precede endDate by more than one minute")
        }
        let now = store.clock.now()
        let earliest = SalesforceTime.floorMinute(now - keptDays * SalesforceTime.day)
        let start = SalesforceTime.floorMinute(rawStart)
        guard start >= earliest else {
            throw .replicationDate(
                "startDate \(SalesforceTime.format(start)) is before the earliest date available \(SalesforceTime.format(earliest))")
        }
        let latest = max(start, min(SalesforceTime.floorMinute(rawEnd), SalesforceTime.floorMinute(now)))
        return (start, latest, earliest)
    }
}
