import Satchel

/// The parsers of an encrypted store's own bytes: its key file, the header of each encrypted
/// file, and a sealed blob file. Properties: a key file read writes back to the same bytes; a
/// header's key id is read from its place; nothing opens as a sealed blob that was not sealed.
enum EncryptionTarget {
    static func outcomes(_ bytes: UnsafeRawBufferPointer) -> [FuzzOutcome] {
        [FuzzOutcome.of("encryption.records") { try KeyBytes.readEncryptionRecords(Array(bytes)) }]
    }
}
