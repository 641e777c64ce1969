import Satchel

/// The key decoder on arbitrary bytes, as a store reads keys back: a whole key (`check`,
/// reference rewrites), element by element by skipping (index reads), and the object id at the
/// end of an object key and of an index entry.
///
/// Properties of a key the decoder accepts: skipping finds the same element boundaries as
/// reading; the id readers find the last element; and the elements survive encoding again.
enum KeyTarget {
    /// The key read whole, element by element both ways, and for its object id.
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        let key = Array(bytes)
        var decoded: (family: UInt8, elements: [JSONValue])?
        var outcomes: [FuzzOutcome] = [
            FuzzOutcome.of("key.decode") {
                let (family, elements) = try KeyBytes.decode(key)
                decoded = (family, elements)
                guard let encoded = KeyBytes.encode(family: family, elements) else { return "a family byte the encoder does not know" }
                guard let again = try? KeyBytes.decode(encoded) else { return "the re-encoded key does not decode" }
                guard again.family == family, again.elements == elements, again.elements.hashValue == elements.hashValue else {
                    return "the elements changed on their way through the encoder: \(elements) became \(again.elements)"
                }
                return nil
            },
            FuzzOutcome.of("key.skip") {
                // Every key the reader reads, the skipper skips, element for element.
                let read = try? KeyBytes.elementEnds(key, skipping: false)
                let ends: [Int]
                do {
                    ends = try KeyBytes.elementEnds(key, skipping: true)
                } catch {
                    if let read { return "reading finds elements ending at \(read), skipping fails: \(error)" }
                    throw error
                }
                guard let read, read != ends else { return nil }
                return "skipping finds elements ending at \(ends), reading at \(read)"
            },
        ]
        // The id readers, with the prefix a store gives them: the family and the model (object
        // keys), and the family, model and index id (index entries).
        outcomes.append(
            FuzzOutcome.of("key.objectID") {
                let ends = (try? KeyBytes.elementEnds(key, skipping: true)) ?? []
                let id = try KeyBytes.objectID(fromKey: key, prefixLength: ends.first ?? min(1, key.count))
                if let decoded, decoded.elements.count == 2, decoded.elements[1].stringValue != id {
                    return "the object id read is '\(id)', the key's last element is \(decoded.elements[1])"
                }
                return nil
            })
        outcomes.append(
            FuzzOutcome.of("key.indexEntry") {
                let ends = (try? KeyBytes.elementEnds(key, skipping: true)) ?? []
                let prefixLength = ends.count >= 2 ? ends[1] : min(1, key.count)
                let valueCount = max(0, ends.count - 3)
                let id = try KeyBytes.objectID(fromIndexEntry: key, prefixLength: prefixLength, valueCount: valueCount)
                if let decoded, decoded.elements.count >= 3, decoded.elements.last?.stringValue != id {
                    return "the object id read is '\(id)', the entry's last element is \(decoded.elements.last!)"
                }
                return nil
            })
        return outcomes
    }
}
