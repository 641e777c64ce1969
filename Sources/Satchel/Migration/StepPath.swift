/// Where a data step of a ``Migration`` acts: a top-level name, or a path as queries write it
/// (``Field``): dots reach into nested objects, a name ending in `[]` into each element of an
/// array. The step acts on the path's last name, in each object the names before it reach (its
/// holders): `items[].product` is `product` in each line of `items`.
struct StepPath {
    /// The path as the step names it.
    let text: String
    let field: Field

    /// - Throws: ``SatchelError`` `.invalidArgument` for an empty name along the path, a path
    ///   ending in `[]` (a step names an attribute, not the elements of an array), or the id,
    ///   `object`.
    init(_ text: String) throws(SatchelError) {
        self.text = text
        if text.hasPrefix("\"") {
            // One attribute's name written as a JSON string, whatever it holds, as the CLI's
            // options read it (a black-box probe: `"a.b"` was taken with its quotes).
            field = try Field(written: text)
        } else {
            // A top-level name (most steps) is not split: a step's path is taken per object.
            field = text.utf8.contains(UInt8(ascii: ".")) ? Field(text) : Field(components: [text])
        }
        if let wrong = field.malformation { throw SatchelError(.invalidArgument, wrong) }
        if field.isID {
            throw SatchelError(.invalidArgument, "'\(text)' is the object id, not an attribute: a step cannot rename, add, remove or convert it")
        }
        if Field.isArrayStep(name) {
            throw SatchelError(
                .invalidArgument, "'\(text)' ends in []: a step names an attribute ('items[].qty' is the qty of each element of 'items')")
        }
    }

    /// The names that lead to the holders (empty: the object itself).
    var holder: ArraySlice<String> { field.components.dropLast() }
    /// The attribute's own name in its holders.
    var name: String { field.components[field.components.count - 1] }

    /// Whether the two paths have the same holders (a rename stays within its object).
    func sharesHolder(with other: StepPath) -> Bool {
        holder.count == other.holder.count && zip(holder, other.holder).allSatisfy { UTF8Order.equal($0, $1) }
    }

    /// Calls `body` with each holder the path reaches in `attributes` (object `id`'s), to change
    /// it: `attributes` itself for a top-level name. A name ending in `[]` goes into each element
    /// of the array it names that is an object (a value that is not an array is its own one
    /// element); a plain name goes into the object it names. With `creating`, a plain name that
    /// is missing gets a new object (kept only when `body` puts something in it), in elements
    /// too; an array or an element is never made. Values that are neither are left as they are.
    /// A holder changes only when `body` changes it.
    ///
    /// - Throws: ``SatchelError`` `.invalidObject` where a plain name (no `[]`) holds an array,
    ///   as queries refuse such a path; and what `body` throws.
    func forEachHolder(
        in attributes: inout JSONObject, of id: String, model: String, creating: Bool = false,
        _ body: (inout JSONObject) throws(SatchelError) -> Void
    ) throws(SatchelError) {
        try visit(&attributes, from: 0, creating: creating) { step throws(SatchelError) in
            let at = field.components[..<step].joined(separator: ".")
            throw SatchelError(
                .invalidObject,
                "object '\(id)': the path '\(text)' meets an array at '\(at)': write '\(field.reachingIntoArray(at: step))' to reach into its elements",
                model: model, objectID: id)
        } body: { holder throws(SatchelError) in
            try body(&holder)
        }
    }

    /// ``forEachHolder(in:of:model:creating:_:)`` for the attributes of a pending change (a
    /// top-level attribute removed is null): where the path meets an array it should not cross,
    /// the change stays as it was (the object's own check refuses the migration).
    func forEachHolder(inChange attributes: inout JSONObject, _ body: (inout JSONObject) -> Void) {
        var changed = attributes
        do throws(SatchelError) {
            try visit(&changed, from: 0, creating: false) { _ throws(SatchelError) in
                throw SatchelError(.invalidObject, "")
            } body: { holder in
                body(&holder)
            }
            attributes = changed
        } catch {
            return
        }
    }

    private func visit(
        _ object: inout JSONObject, from index: Int, creating: Bool, crossing: (Int) throws(SatchelError) -> Void,
        body: (inout JSONObject) throws(SatchelError) -> Void
    ) throws(SatchelError) {
        let names = field.components
        guard index < names.count - 1 else { return try body(&object) }
        let step = names[index]
        if Field.isArrayStep(step) {
            let arrayName = String(step.dropLast(2))
            switch object[arrayName] {
            case .array(var elements)?:
                var changed = false
                for i in elements.indices {
                    guard case .object(let element) = elements[i] else { continue }
                    var inner = element
                    try visit(&inner, from: index + 1, creating: creating, crossing: crossing, body: body)
                    if !inner.isIdentical(to: element) {
                        elements[i] = .object(inner)
                        changed = true
                    }
                }
                if changed { object[arrayName] = .array(elements) }
            case .object(let single)?:
                var inner = single
                try visit(&inner, from: index + 1, creating: creating, crossing: crossing, body: body)
                if !inner.isIdentical(to: single) { object[arrayName] = .object(inner) }
            default:
                return
            }
        } else {
            switch object[step] {
            case .object(let nested)?:
                var inner = nested
                try visit(&inner, from: index + 1, creating: creating, crossing: crossing, body: body)
                if !inner.isIdentical(to: nested) { object[step] = .object(inner) }
            case .array?:
                try crossing(index + 1)
            case nil where creating:
                var inner = JSONObject()
                try visit(&inner, from: index + 1, creating: true, crossing: crossing, body: body)
                if !inner.isEmpty { object[step] = .object(inner) }
            default:
                return
            }
        }
    }
}
