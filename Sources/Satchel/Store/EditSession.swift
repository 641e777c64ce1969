/// A draft copy of one object, edited freely and then saved or discarded.
///
/// ```swift
/// let edit = try products.beginEditing("p-1")
/// edit.object["price"] = 12
/// edit.object["discount"] = nil
/// try edit.finishEditing(save: true)      // writes only what changed, logged for sync
/// ```
///
/// Saving writes only the attributes that differ from the copy taken at `beginEditing`, as one
/// update, so changes other writers made meanwhile to other attributes survive. An edit session
/// is not `Sendable`: keep it on one thread.
public final class EditSession {
    /// The model of the object.
    public let model: Model
    /// The object as it was when editing began.
    public let original: Object
    /// The draft: change its attributes freely.
    public var object: Object
    private var finished = false

    init(model: Model, original: Object) {
        self.model = model
        self.original = original
        self.object = original
    }

    /// Whether the draft differs from the original.
    public var hasChanges: Bool { !Transaction.diff(original.attributes, object.attributes.removingNulls()).isEmpty }

    /// With `save: true`, writes the attributes that changed (logged for sync, like any update);
    /// with `save: false`, discards the draft. Either way the session ends.
    ///
    /// - Returns: the stored object after saving (nil when the null rule deleted it, or when
    ///   discarding).
    /// - Throws: ``SatchelError`` `.notFound` when the object was deleted meanwhile; the session
    ///   then stays open, so the draft is not lost.
    @discardableResult
    public func finishEditing(save: Bool) throws -> Object? {
        precondition(!finished, "finishEditing was already called on this edit session")
        guard save else {
            finished = true
            return nil
        }
        let changes = Transaction.diff(original.attributes, object.attributes.removingNulls())
        let stored = changes.isEmpty ? try model.find(original.id) : try model.update(original.id, with: changes)
        if changes.isEmpty && stored == nil {
            throw SatchelError(.notFound, "model '\(model.name)' has no object '\(original.id)'", model: model.name, objectID: original.id)
        }
        finished = true
        if !changes.isEmpty, (try? model.store.entry(model.name).definition.recordsChanges) == true {
            model.store.notifyEditSaved(model.name, original.id)
        }
        return stored
    }
}

@available(*, unavailable)
extension EditSession: Sendable {}

extension Model {
    /// Starts editing a draft copy of object `id`.
    ///
    /// - Throws: ``SatchelError`` `.notFound` when there is no such object.
    public func beginEditing(_ id: String) throws -> EditSession {
        guard let object = try find(id) else {
            throw SatchelError(.notFound, "model '\(name)' has no object '\(id)'", model: name, objectID: id)
        }
        return EditSession(model: self, original: object)
    }
}
