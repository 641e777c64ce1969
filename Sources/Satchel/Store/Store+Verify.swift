import Foundation
import Synchronization

/// What ``Store/verify()`` found.
public struct VerificationReport: Sendable {
    /// Models, objects and pending changes read.
    public var models = 0
    public var objects = 0
    public var pendingChanges = 0
    /// Keys read in all partitions.
    public var keys = 0
    /// One line per problem (the first 1,000), empty when the store is healthy.
    public var problems: [String] = []
    /// The number of problems, including those beyond the first 1,000.
    public var problemCount = 0
    /// What is no damage but wants an action, one line each: an index whose build is under way
    /// or was interrupted (declaring it again finishes it; queries do not use it until then).
    public var notes: [String] = []

    /// Whether no problem was found.
    public var isHealthy: Bool { problemCount == 0 }

    mutating func report(_ problem: String) {
        problemCount += 1
        if problems.count < 1000 { problems.append(problem) }
    }
}

extension Store {
    /// Reads every key of every partition and checks that it decodes and is consistent: each
    /// object decodes to a non-empty JSON object without nulls, belongs to a known model of that
    /// partition, and fits the model's fixed schema, if it has one; each pending change decodes
    /// and belongs to a model that records changes; the stored statistics equal what a scan
    /// counts; no migration is left unfinished.
    ///
    /// Run it on a quiet store: writes during the check may be reported as mismatches.
    public func verify() throws -> VerificationReport {
        var report = VerificationReport()
        let definitions = catalog.withLock { $0.models }
        report.models = definitions.count
        var counted: [NameKey: StoredStatistics] = [:]
        for (partition, db) in openPartitions {
            let iterator = try db.makeIterator()
            iterator.seekToFirst()
            while iterator.isValid {
                report.keys += 1
                let key = iterator.key
                check(key: key, value: iterator.value, partition: partition, definitions: definitions, counted: &counted, report: &report)
                iterator.next()
            }
            try iterator.checkError()
        }
        for migration in try unfinishedMigrations() {
            report.report(
                "model '\(migration.model)': migration '\(migration.name)' is unfinished (\(migration.changed) objects rewritten so far): run it again (store.migrate, satchel migrate)"
            )
        }
        for rewrite in try unfinishedRewrites() {
            report.report(
                "model '\(rewrite.model)': \(rewrite.oldIDs.count) objects were given new ids, and references to them in other partitions are not all rewritten yet (old ids \(rewrite.oldIDs.prefix(5).joined(separator: ", "))\(rewrite.oldIDs.count > 5 ? ", …" : ""); the next open or sync rewrites them)"
            )
        }
        for (name, entry) in definitions {
            var actual = counted[name] ?? StoredStatistics()
            actual.recountDue = entry.statistics.recountDue  // a mark, not a count
            // Only ready indexes have exact statistics; the others are being built or dropped.
            for index in entry.indexes where index.state != .ready {
                actual.indexEntries[index.id] = entry.statistics.indexEntries[index.id]
                actual.textTotals[index.id] = entry.statistics.textTotals[index.id]
                if index.state == .building {
                    report.notes.append(
                        "model '\(name.name)': index \(index.definition) is incomplete (its build is under way or was interrupted): queries do not use it; declaring it again (createIndex, satchel index) finishes it"
                    )
                }
            }
            if actual != entry.statistics {
                report.report(
                    "model '\(name.name)': stored statistics \(entry.statistics.summary) differ from the data \(actual.summary)")
            }
        }
        return report
    }

    private func check(
        key: [UInt8], value: [UInt8], partition: Partition, definitions: [NameKey: ModelEntry],
        counted: inout [NameKey: StoredStatistics], report: inout VerificationReport
    ) {
        let where_ = "\(partition.rawValue) partition"
        guard let (family, elements) = try? Keys.decode(key) else {
            report.report("\(where_): an undecodable key \(key.prefix(32).map { String($0, radix: 16) }.joined(separator: " "))")
            return
        }
        func model(_ element: JSONValue?) -> (NameKey, ModelEntry)? {
            guard let name = element?.stringValue else { return nil }
            let key = NameKey(name)
            guard let entry = definitions[key], entry.definition.partition == partition else { return nil }
            return (key, entry)
        }
        /// The model and id of a `(family, model, objectId)` key; nil after reporting why not.
        func objectKey(_ what: String) -> (NameKey, ModelEntry, String)? {
            guard elements.count == 2, let id = elements[1].stringValue else {
                report.report("\(where_): a malformed \(what) key")
                return nil
            }
            guard let (name, entry) = model(elements[0]) else {
                report.report("\(where_): \(what) '\(id)' belongs to an unknown model '\(elements[0].stringValue ?? "?")'")
                return nil
            }
            return (name, entry, id)
        }
        switch family {
        case .meta:
            break  // definitions were decoded at open; statistics are compared at the end
        case .object:
            guard let (name, _, id) = objectKey("object") else { return }
            report.objects += 1
            counted[name, default: StoredStatistics()].objects += 1
            do {
                let attributes = try value.withUnsafeBytes { try StoredObject.decode($0, model: name.name, id: id) }
                counted[name, default: StoredStatistics()].adjustArrays(old: nil, new: attributes)
                _ = try value.withUnsafeBytes { try StoredObject.version($0, model: name.name, id: id) }
                // Every object has each of its entries in every ready index.
                for index in definitions[name]?.indexes ?? [] where index.state == .ready {
                    for entryKey in index.entries(model: name.name, objectID: id, attributes: attributes)
                    where (try? database(partition).get(entryKey)) == nil {
                        report.report("model '\(name.name)': object '\(id)' lacks its entry in index \(index.definition)")
                    }
                    if index.definition.kind == .text, let text = index.textPostings(attributes) {
                        let iterator = try database(partition).makeIterator()
                        for (word, positions) in text.words
                        where try index.storedTextPosting(word, id: id, iterator: iterator) != TextPosting(length: text.length, positions: positions)
                        {
                            report.report("model '\(name.name)': object '\(id)' lacks its posting of '\(word)' in index \(index.definition)")
                        }
                    }
                }
                if attributes.isEmpty { report.report("model '\(name.name)': object '\(id)' has no attributes") }
                if case .fixedSchema = definitions[name]?.definition.kind, var checker = definitions[name]?.definition {
                    checker.choices = [:]
                    do throws(SatchelError) {
                        try checker.validate(attributes, objectID: id)
                    } catch {
                        report.report("model '\(name.name)': object '\(id)' does not fit the model's schema: \(error.message)")
                    }
                }
                if attributes.contains(where: { $0.value.isNull }) {
                    report.report("model '\(name.name)': object '\(id)' stores a null attribute")
                }
                if attributes.contains(Object.idAttribute) {
                    report.report("model '\(name.name)': object '\(id)' stores its id as an attribute")
                }
            } catch {
                report.report("model '\(name.name)': \(error)")
            }
        case .change:
            guard let (name, entry, id) = objectKey("pending change") else { return }
            report.pendingChanges += 1
            if !entry.definition.recordsChanges {
                report.report("model '\(name.name)' does not sync but has a pending change for '\(id)'")
            }
            do {
                let record = try value.withUnsafeBytes { try StoredChange(decoding: $0) }
                counted[name, default: StoredStatistics()].adjustPending(record.kind, by: 1)
                // A create or update pushes the object: without it there is nothing to send.
                if record.kind != .delete, (try? database(partition).get(Keys.object(name.name, id))) == nil {
                    report.report("model '\(name.name)': a pending \(record.kind.rawValue) of '\(id)', whose object is gone")
                }
            } catch {
                report.report("model '\(name.name)': \(error)")
            }
        case .inFlight, .error, .version:
            guard let (name, _, id) = objectKey("\(family) record") else { return }
            do {
                switch family {
                case .inFlight:
                    _ = try InFlightChange(json: try JSONObject(parsingRecord: value))
                    counted[name, default: StoredStatistics()].inFlight += 1
                case .error:
                    _ = try RefusedChange(model: name.name, objectID: id, stored: try JSONObject(parsingRecord: value))
                    counted[name, default: StoredStatistics()].errors += 1
                default:
                    _ = try JSONValue(parsing: value)
                }
            } catch {
                report.report("model '\(name.name)': an undecodable \(family) record for '\(id)'")
            }
        case .index:
            // (idx, model, indexId, values…, objectId): the entry must be one its object makes.
            guard elements.count >= 3, let indexID = elements[1].stringValue.flatMap({ Int($0) }), let id = elements.last?.stringValue else {
                report.report("\(where_): a malformed index key")
                return
            }
            guard let (name, entry) = model(elements[0]) else {
                report.report("\(where_): an index entry of '\(id)' belongs to an unknown model")
                return
            }
            guard let index = entry.indexes.first(where: { $0.id == indexID }) else {
                report.report("model '\(name.name)': an entry of '\(id)' belongs to an unknown index #\(indexID)")
                return
            }
            if index.definition.kind == .text {
                guard elements.count == 4, case .string(let word) = elements[2] else {
                    report.report("model '\(name.name)': index \(index.definition) has a key that is no posting block")
                    return
                }
                checkTextBlock(value, word: word, firstID: id, index: index, model: name, partition: partition, counted: &counted, report: &report)
                return
            }
            counted[name, default: StoredStatistics()].adjustIndex(indexID, by: 1)
            guard index.state != .dropping else { return }
            guard let stored = try? database(partition).get(Keys.object(name.name, id)) else {
                report.report("model '\(name.name)': index \(index.definition) has an entry for '\(id)', which does not exist")
                return
            }
            guard let attributes = try? stored.withUnsafeBytes({ try StoredObject.decode($0, model: name.name, id: id) }) else {
                return  // reported with the object itself
            }
            if !index.entries(model: name.name, objectID: id, attributes: attributes).contains(key) {
                report.report("model '\(name.name)': index \(index.definition) has an entry for '\(id)' that does not match the object")
            } else if value
                != (index.storesObjects ? (try? stored.withUnsafeBytes { try StoredObject.attributesBytes($0, model: name.name, id: id) }) ?? [] : [])
            {
                report.report("model '\(name.name)': index \(index.definition) holds a stale copy of '\(id)'")
            }
        }
    }
}

extension Store {
    /// Checks a posting block of text index `index`: it decodes, starts at the id its key
    /// names, holds ids in order, and each posting is the one its object makes.
    private func checkTextBlock(
        _ value: [UInt8], word: String, firstID: String, index: StoredIndex, model name: NameKey, partition: Partition,
        counted: inout [NameKey: StoredStatistics], report: inout VerificationReport
    ) {
        guard let postings = try? value.withUnsafeBytes({ try TextBlock.decode($0) }), let first = postings.first else {
            report.report("model '\(name.name)': index \(index.definition) has an undecodable posting block of '\(word)' at '\(firstID)'")
            return
        }
        counted[name, default: StoredStatistics()].adjustIndex(index.id, by: postings.count)
        for (_, posting) in postings where posting.positions.first == 0 {
            counted[name, default: StoredStatistics()].adjustText(index.id, objects: 1, words: posting.length)
        }
        if !first.id.elementsEqual(firstID.utf8) || zip(postings, postings.dropFirst()).contains(where: { UTF8Order.compareBytes($0.id, $1.id) >= 0 })
        {
            report.report("model '\(name.name)': index \(index.definition) has a posting block of '\(word)' whose ids are out of order")
        }
        guard index.state != .dropping else { return }
        for (idBytes, posting) in postings {
            let id = String(decoding: idBytes, as: UTF8.self)
            guard let stored = try? database(partition).get(Keys.object(name.name, id)) else {
                report.report("model '\(name.name)': index \(index.definition) has a posting of '\(word)' for '\(id)', which does not exist")
                continue
            }
            guard let attributes = try? stored.withUnsafeBytes({ try StoredObject.decode($0, model: name.name, id: id) }) else {
                continue  // reported with the object itself
            }
            let text = index.textPostings(attributes)
            if text.flatMap({ text in text.words[word].map { TextPosting(length: text.length, positions: $0) } }) != posting {
                report.report("model '\(name.name)': index \(index.definition) has a posting of '\(word)' for '\(id)' that does not match the object")
            }
        }
    }
}

extension StoredStatistics {
    var summary: String {
        let entries = indexEntries.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value)" }.joined(separator: ", ")
        let text = textTotals.sorted { $0.key < $1.key }.map { "#\($0.key): \($0.value.objects) objects, \($0.value.words) words" }
        let places = arrays.map { ([$0.key.name], $0.value) } + nestedArrays.map { ($0.key.map(\.name), $0.value) }
        let held = places.map { "\($0.0.joined(separator: ".")): \($0.1)" }.sorted()
        return
            "(objects \(objects), pending \(pendingCreates)/\(pendingUpdates)/\(pendingDeletes), in flight \(inFlight), errors \(errors), index entries [\(entries)]\(text.isEmpty ? "" : ", text [\(text.joined(separator: "; "))]")\(held.isEmpty ? "" : ", arrays [\(held.joined(separator: ", "))]"))"
    }
}
