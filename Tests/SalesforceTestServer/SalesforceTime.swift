import Foundation

/// Times as Salesforce writes and reads them, in milliseconds since 1970 (UTC).
///
/// - Answers: `2024-05-01T10:00:00.000+0000` (offset without a colon, always UTC); dates
///   `2024-05-01`; the HTTP `Date` and `Last-Modified` headers `Wed, 01 May 2024 10:00:00 GMT`.
/// - Input (request bodies, SOQL literals, `getDeleted` parameters): ISO 8601 with seconds, an
///   optional fraction and a zone `Z`, `±hh:mm`, `±hhmm` or `±hh`.
enum SalesforceTime {
    static let second: Int64 = 1000
    static let minute: Int64 = 60_000
    static let day: Int64 = 86_400_000

    /// `t` rounded down to its second.
    static func floorSecond(_ t: Int64) -> Int64 { floorDiv(t, second) * second }

    /// `t` rounded down to its minute (`getDeleted` ignores seconds).
    static func floorMinute(_ t: Int64) -> Int64 { floorDiv(t, minute) * minute }

    /// The day (days since 1970-01-01) of an instant.
    static func floorDays(_ t: Int64) -> Int64 { floorDiv(t, day) }

    /// The real clock.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    // MARK: - Writing

    /// `2024-05-01T10:00:00.000+0000`.
    static func format(_ t: Int64) -> String {
        let (days, ms) = (floorDiv(t, day), t - floorDiv(t, day) * day)
        let (y, m, d) = civil(fromDays: days)
        let h = ms / 3_600_000, mi = ms / 60_000 % 60, s = ms / 1000 % 60, f = ms % 1000
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2)).\(pad(f, 3))+0000"
    }

    /// `2024-05-01` for a day number (days since 1970-01-01).
    static func formatDate(days: Int64) -> String {
        let (y, m, d) = civil(fromDays: days)
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))"
    }

    /// An HTTP date: `Wed, 01 May 2024 10:00:00 GMT`.
    static func httpDate(_ t: Int64) -> String {
        let days = floorDiv(t, day)
        let ms = t - days * day
        let (y, m, d) = civil(fromDays: days)
        let weekday = weekdays[Int(((days % 7) + 7 + 4) % 7)]  // 1970-01-01 was a Thursday.
        return
            "\(weekday), \(pad(d, 2)) \(months[Int(m) - 1]) \(pad(y, 4)) \(pad(ms / 3_600_000, 2)):\(pad(ms / 60_000 % 60, 2)):\(pad(ms / 1000 % 60, 2)) GMT"
    }

    // MARK: - Reading

    /// An ISO 8601 date-time with a zone; nil for anything else.
    static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, let days = dateDays(b), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            let h = digits(b, 11, 2), b[13] == UInt8(ascii: ":"), let mi = digits(b, 14, 2), b[16] == UInt8(ascii: ":"),
            let s = digits(b, 17, 2), h < 24, mi < 60, s < 60
        else { return nil }
        var i = 19
        var millis: Int64 = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.count, isDigit(b[i]) { i += 1 }
            guard i > start else { return nil }
            let fraction = Array(b[start..<min(i, start + 3)]) + Array(repeating: UInt8(ascii: "0"), count: max(0, 3 - (i - start)))
            millis = digits(fraction, 0, 3)!
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign: Int64 = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(b, i, 2) else { return nil }
            i += 2
            var om: Int64 = 0
            if i < b.count, b[i] == UInt8(ascii: ":") {
                guard let value = digits(b, i + 1, 2) else { return nil }
                om = value
                i += 3
            } else if let value = digits(b, i, 2) {
                om = value
                i += 2
            }
            guard oh < 24, om < 60 else { return nil }
            offset = sign * (oh * 60 + om) * minute
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        return days * day + h * 3_600_000 + mi * 60_000 + s * 1000 + millis - offset
    }

    /// A `YYYY-MM-DD` date as a day number; nil for anything else.
    static func parseDate(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        return b.count == 10 ? dateDays(b) : nil
    }

    /// An HTTP date (`Wed, 01 May 2024 10:00:00 GMT`); nil for anything else.
    static func parseHTTPDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let d = Int64(parts[1]),
            let m = months.firstIndex(of: String(parts[2])), let y = Int64(parts[3])
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard clock.count == 3, (1...31).contains(d) else { return nil }
        return days(fromCivil: y, Int64(m + 1), d) * day + clock[0] * 3_600_000 + clock[1] * 60_000 + clock[2] * 1000
    }

    // MARK: - Calendar

    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func dateDays(_ b: [UInt8]) -> Int64? {
        guard b.count >= 10, let y = digits(b, 0, 4), b[4] == UInt8(ascii: "-"), let m = digits(b, 5, 2), b[7] == UInt8(ascii: "-"),
            let d = digits(b, 8, 2), (1...12).contains(m), d >= 1, d <= daysIn(month: m, year: y)
        else { return nil }
        return days(fromCivil: y, m, d)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day number.
    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func digits(_ b: [UInt8], _ start: Int, _ count: Int) -> Int64? {
        guard start >= 0, start + count <= b.count else { return nil }
        var value: Int64 = 0
        for byte in b[start..<start + count] {
            guard isDigit(byte) else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
