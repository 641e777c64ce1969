/// A JSON object: attribute names mapped to values, kept sorted by the UTF-8 bytes of the names.
///
/// Names are compared byte-exactly (by Unicode scalars), so two names that Swift's `String`
/// considers canonically equivalent stay two attributes. Iteration and JSON output follow the
/// sorted order, which is why Satchel prints objects with sorted keys.
///
/// Setting a member to `nil` through the subscript removes it. Setting it to ``JSONValue/null``
/// stores an explicit null, which is how updates say "remove this attribute" (the null rule).
///
/// ```swift
/// var attributes: JSONObject = ["name": "Widget", "price": 9.5]
/// attributes["price"] = nil          // removed
/// attributes["color"] = .null        // an explicit null: an update that removes `color`
/// ```
public struct JSONObject: Sendable, Hashable {
    /// Members sorted by name bytes, names unique.
    private var members: [Member]

    struct Member: Sendable, Hashable {
        var name: String
        var value: JSONValue

        static func == (a: Member, b: Member) -> Bool { UTF8Order.equal(a.name, b.name) && a.value == b.value }
        func hash(into hasher: inout Hasher) {
            UTF8Order.hash(name, into: &hasher)
            hasher.combine(value)
        }
    }

    /// An empty object.
    public init() { members = [] }

    /// An object of the given members; a name given twice keeps its last value.
    public init<S: Sequence<(String, JSONValue)>>(_ pairs: S) {
        members = pairs.map { Member(name: $0.0, value: $0.1) }
        Self.sortAndDeduplicate(&members)
    }

    /// An object from a dictionary.
    public init(_ dictionary: [String: JSONValue]) {
        self.init(dictionary.map { ($0.key, $0.value) })
    }

    /// Members already sorted by name bytes and unique. Internal: the parser and decoders that
    /// read Satchel's own output use it to skip sorting.
    init(sortedUniqueMembers: [Member]) { members = sortedUniqueMembers }

    /// Builds an object from members in any order (the parser's path).
    init(unsortedMembers: [Member]) {
        members = unsortedMembers
        Self.sortAndDeduplicate(&members)
    }

    private static func sortAndDeduplicate(_ members: inout [Member]) {
        var sorted = true
        for i in members.indices.dropFirst() where UTF8Order.compare(members[i - 1].name, members[i].name) >= 0 {
            sorted = false
            break
        }
        if sorted { return }
        // Stable sort, then keep the last of equal names.
        let indexed = members.enumerated().sorted { a, b in
            let c = UTF8Order.compare(a.element.name, b.element.name)
            return c != 0 ? c < 0 : a.offset < b.offset
        }
        var result: [Member] = []
        result.reserveCapacity(indexed.count)
        for (_, member) in indexed {
            if let last = result.last, UTF8Order.equal(last.name, member.name) {
                result[result.count - 1] = member
            } else {
                result.append(member)
            }
        }
        members = result
    }

    /// The number of members.
    public var count: Int { members.count }
    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }
    /// The member names, in byte order.
    public var keys: [String] { members.map(\.name) }

    /// Binary search by name bytes: the index of `name`, or where it would go.
    private func search(_ name: String) -> (found: Bool, index: Int) {
        var low = 0, high = members.count
        while low < high {
            let mid = (low + high) / 2
            let c = UTF8Order.compare(members[mid].name, name)
            if c == 0 { return (true, mid) }
            if c < 0 { low = mid + 1 } else { high = mid }
        }
        return (false, low)
    }

    /// The value of member `name`; assigning nil removes the member.
    public subscript(name: String) -> JSONValue? {
        get {
            let (found, index) = search(name)
            return found ? members[index].value : nil
        }
        set {
            let (found, index) = search(name)
            switch (found, newValue) {
            case (true, let value?): members[index].value = value
            case (true, nil): members.remove(at: index)
            case (false, let value?): members.insert(Member(name: name, value: value), at: index)
            case (false, nil): break
            }
        }
    }

    /// Whether the object has a member `name` (possibly an explicit null).
    public func contains(_ name: String) -> Bool { search(name).found }

    /// Removes member `name` and returns its value.
    @discardableResult
    public mutating func removeValue(forKey name: String) -> JSONValue? {
        let (found, index) = search(name)
        return found ? members.remove(at: index).value : nil
    }

    /// Splits off member `name` and drops explicit nulls, in one pass: what a write stores.
    func splitting(_ name: String) -> (value: JSONValue?, rest: JSONObject) {
        // The usual case (no such member, no null) copies nothing.
        if !members.contains(where: { $0.value.isNull }) {
            let (found, index) = search(name)
            guard found else { return (nil, self) }
            var rest = members
            return (rest.remove(at: index).value, JSONObject(sortedUniqueMembers: rest))
        }
        var taken: JSONValue?
        var rest: [Member] = []
        rest.reserveCapacity(members.count)
        for member in members {
            if taken == nil && UTF8Order.equal(member.name, name) {
                taken = member.value
            } else if !member.value.isNull {
                rest.append(member)
            }
        }
        return (taken, JSONObject(sortedUniqueMembers: rest))
    }

    /// Removes member `name` and the explicit nulls in place, and returns `name`'s value: what
    /// ``splitting(_:)`` returns, without copying the members when the object is not shared.
    mutating func split(_ name: String) -> JSONValue? {
        let (found, index) = search(name)
        let taken = found ? members.remove(at: index).value : nil
        if members.contains(where: { $0.value.isNull }) { members.removeAll { $0.value.isNull } }
        return taken
    }

    /// The object without its explicit-null members.
    public func removingNulls() -> JSONObject {
        guard members.contains(where: { $0.value.isNull }) else { return self }
        return JSONObject(sortedUniqueMembers: members.filter { !$0.value.isNull })
    }

    /// Whether the two objects have identical members (see ``JSONValue/isIdentical(to:)``).
    public func isIdentical(to other: JSONObject) -> Bool {
        members.count == other.members.count
            && zip(members, other.members).allSatisfy {
                UTF8Order.equal($0.name, $1.name) && $0.value.isIdentical(to: $1.value)
            }
    }
}

extension JSONObject: Sequence {
    /// Iterates the members in name byte order.
    public struct Iterator: IteratorProtocol {
        private let members: [Member]
        private var index = 0

        init(_ members: [Member]) { self.members = members }

        public mutating func next() -> (key: String, value: JSONValue)? {
            guard index < members.count else { return nil }
            defer { index += 1 }
            return (members[index].name, members[index].value)
        }
    }

    /// Members in name byte order.
    public func makeIterator() -> Iterator { Iterator(members) }

    public var underestimatedCount: Int { members.count }

    /// The members for which `isIncluded` holds, as an object (no re-sorting).
    public func filter(_ isIncluded: (_ name: String, _ value: JSONValue) throws -> Bool) rethrows -> JSONObject {
        JSONObject(sortedUniqueMembers: try members.filter { try isIncluded($0.name, $0.value) })
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }
}

extension JSONObject: CustomStringConvertible {
    /// The object as compact JSON text.
    public var description: String { JSONValue.object(self).description }
}
