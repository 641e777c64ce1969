package import Foundation

/// HTTP dates (RFC 9110 §5.6.7), as servers send them in `Date` and `Retry-After`: the
/// preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and, as recipients must accept them,
/// the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`) forms. Fields are read into ISO 8601 for
/// `Date.ISO8601FormatStyle`: Foundation's `DateFormatter` leaks on non-ASCII text (the fuzzers
/// found it) and hands the string to ICU, which crashed on another hostile datetime.
package enum HTTPDate {
    /// The months, in order.
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

    /// The instant a header field names when it may hold several dates: a field sent on several
    /// lines reaches the client joined by commas (RFC 9110 §5.3), as a server whose framework
    /// sends a `Date` of its own before the application's does (a black-box probe: the field
    /// read as no date, Salesforce's `getDeleted` window ended at the last record's time). The
    /// last date, the one written last; nil when none parses.
    package static func lastDate(inField text: String) -> Date? {
        if let date = parse(text) { return date }
        // Each ", " may start the last date; an IMF-fixdate holds one itself, after its day.
        var end = text.endIndex
        while let separator = text[..<end].range(of: ", ", options: .backwards) {
            if let date = parse(String(text[separator.upperBound...])) { return date }
            end = separator.lowerBound
        }
        return nil
    }

    /// The instant `text` names; nil for anything else.
    package static func parse(_ text: String) -> Date? {
        // Single spaces between fields, but asctime's two before a day of one digit.
        let fields = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        var day: String, month: String, year: String, time: String
        if fields.count == 6, fields[0].hasSuffix(","), days.contains(String(fields[0].dropLast())), fields[5] == "GMT" {
            (day, month, year, time) = (fields[1], fields[2], fields[3], fields[4])  // IMF-fixdate
        } else if fields.count == 4, fields[0].hasSuffix(","), longDays.contains(String(fields[0].dropLast())), fields[3] == "GMT" {
            // RFC 850: a two-digit year; RFC 9110 reads one more than 50 years ahead as the past.
            let parts = fields[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, parts[2].utf8.count == 2, let short = Int(parts[2]) else { return nil }
            (day, month, year, time) = (parts[0], parts[1], String(short < 70 ? 2000 + short : 1900 + short), fields[2])
        } else if fields.count == 5, days.contains(fields[0]), fields[2].utf8.count == 2 {
            (day, month, year, time) = (fields[2], fields[1], fields[4], fields[3])  // asctime
        } else if fields.count == 6, days.contains(fields[0]), fields[2].isEmpty, fields[3].utf8.count == 1 {
            (day, month, year, time) = ("0" + fields[3], fields[1], fields[5], fields[4])  // asctime, a day of one digit
        } else {
            return nil
        }
        guard day.utf8.count == 2, day.utf8.allSatisfy({ (48...57).contains($0) }), year.utf8.count == 4,
            year.utf8.allSatisfy({ (48...57).contains($0) }),
            time.utf8.count == 8, time.utf8.allSatisfy({ (48...58).contains($0) }), let index = months.firstIndex(of: month)
        else { return nil }
        let iso = "\(year)-\(index < 9 ? "0" : "")\(index + 1)-\(day)T\(time)Z"
        return try? Date.ISO8601FormatStyle().parse(iso)
    }
}
