import Foundation
import Satchel
@testable import SatchelKinto
import Testing

@Suite("Kinto: ids and attributes on the wire")
struct KintoMappingTests {
    @Test(arguments: ["p1", "Product_2-b", "9"])
    func plainIDsTravelAsTheyAre(_ id: String) {
        #expect(KintoMapping.recordID(id) == id)
        #expect(KintoMapping.objectID(id) == id)
    }

    @Test(arguments: ["bad id", "_x", "-x", "a.b", "x--YmFkIGlk", "x--eC0tWW1Ga0lHbGs", "héllo ✓", "a/b?c", ""])
    func otherIDsAreEncodedReversibly(_ id: String) throws {
        let encoded = KintoMapping.recordID(id)
        #expect(encoded != id)
        #expect(encoded.hasPrefix("x--"))
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
        #expect(encoded.allSatisfy(allowed.contains), "\(encoded) is a valid Kinto id")
        #expect(KintoMapping.objectID(encoded) == id)
    }

    @Test("a record id with the prefix that is no encoding Satchel makes is the object's id, and goes back unchanged (found by a black-box probe)")
    func aForeignIDWithThePrefixIsKept() {
        #expect(KintoMapping.objectID("x--!!") == "x--!!")
        #expect(KintoMapping.objectID("x--YQ") == "x--YQ", "'a' would travel as itself, so this is not its encoding")
        for id in ["x--notb64", "x--YQ", "x--looks-encoded", "x--", "x--eC0tYQ"] {
            #expect(KintoMapping.recordID(KintoMapping.objectID(id)) == id, "\(id) goes back as it came")
        }
        #expect(KintoMapping.objectID("x--YmFkIGlk") == "bad id")
        #expect(KintoMapping.recordID("x--YmFkIGlk") != "x--YmFkIGlk", "an id that is an encoding travels encoded again")
    }

    @Test("a field no attribute travels as is not read; every attribute name goes and comes back as itself (found by a black-box probe)")
    func foreignFields() {
        for field in ["~z", "~object", "~~object", "~"] {
            #expect(KintoMapping.attribute(field) == nil, "\(field) is not read")
        }
        for attribute in ["z", "~z", "~~z", "id", "~id", "deleted", "last_modified", "~object", "~~object", "~", "", "é"] {
            #expect(KintoMapping.attribute(KintoMapping.field(attribute)) == attribute, "\(attribute) comes back")
        }
        #expect(
            KintoMapping.record(["id": "c1", "last_modified": 2, "z": "plain", "~z": "tilde", "~~object": "tt"])
                == .object(id: "c1", attributes: ["z": "plain"], version: 2))
    }

    @Test func kintosFieldNamesAreEscaped() {
        let data = KintoMapping.data(["id": "mine", "last_modified": 3, "deleted": true, "~t": 1, "name": "n", "gone": .null])
        #expect(data == ["~id": "mine", "~last_modified": 3, "~deleted": true, "~~t": 1, "name": "n", "gone": .null])
    }

    @Test func recordsReadBack() throws {
        let record: JSONValue = ["id": "x--YmFkIGlk", "last_modified": 17, "~id": "mine", "~~t": 1, "name": "n", "gone": .null]
        #expect(KintoMapping.record(record) == .object(id: "bad id", attributes: ["id": "mine", "~t": 1, "name": "n"], version: 17))
    }

    @Test("a field named object (Satchel's id attribute) reads as ~object and goes back as object")
    func aFieldNamedObject() {
        #expect(KintoMapping.attribute("object") == "~object")
        #expect(KintoMapping.field("~object") == "object")
        #expect(KintoMapping.record(["id": "g3", "last_modified": 4, "object": 5]) == .object(id: "g3", attributes: ["~object": 5], version: 4))
        #expect(KintoMapping.data(["~object": "zzz", "name": "n"]) == ["object": "zzz", "name": "n"])
    }

    @Test func tombstonesAndEmptyRecordsAreDeletes() {
        #expect(KintoMapping.record(["id": "a", "last_modified": 5, "deleted": true]) == .deleted(id: "a", version: 5))
        #expect(KintoMapping.record(["id": "a", "last_modified": 6, "name": .null]) == .deleted(id: "a", version: 6))
        // A live record written by another client with a field named `deleted` is not a tombstone.
        #expect(
            KintoMapping.record(["id": "a", "last_modified": 7, "deleted": true, "name": "n"])
                == .object(id: "a", attributes: ["name": "n"], version: 7))
    }

    @Test(arguments: [JSONValue.array([]), ["id": 3, "last_modified": 1], ["id": "a"], ["id": "a", "last_modified": "1"]])
    func malformedRecordsAreRefused(_ value: JSONValue) {
        #expect(KintoMapping.record(value) == nil)
    }

    @Test("an attribute whose name holds a dot goes to no filter, which Kinto would read as the path; the path's goes (found by a black-box probe)")
    func dottedNamesAreNoFilter() {
        #expect(KintoBackend.filters(Field(components: ["a.b"]) == 8).isEmpty)
        #expect(KintoBackend.filters(Field(components: ["a.b"]).exists(true) && Field("n") == 1).map(\.0) == ["n"])
        #expect(KintoBackend.filters(Field("a.b") == 8).map(\.0) == ["a.b"])
    }
}
