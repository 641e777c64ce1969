extension Model {
    /// The object `id` with the associations named by `paths` resolved into nested objects, or
    /// nil when there is no such object: the read side of ``Store/importGraph(_:)``.
    ///
    /// An association attribute (see ``ModelDefinition/associations``) that holds an id becomes
    /// that object's attributes, with its id under `object`; one that holds an array of ids
    /// becomes the array of those objects. An id whose object is missing stays an id. A path
    /// such as `customer.address` resolves `customer`, then `address` of the customer's model.
    ///
    /// ```swift
    /// let order = try orders.find("o1", including: ["customer.address", "items"])
    /// // order?["customer"]?["address"]?["city"], order?["items"]?.arrayValue?.first?["name"]
    /// ```
    ///
    /// Everything is read from one consistent snapshot (``Store/read(_:)``).
    ///
    /// - Throws: ``SatchelError`` `.invalidArgument` for a path whose attribute is not an
    ///   association of its model (the message names the model's associations).
    public func find(_ id: String, including paths: [String]) throws -> Object? {
        try store.read { try $0.find(id, in: self, including: paths) }
    }
}
