/*
 * njs for the SageMaker TensorFlow Serving front end (njs 0.7+, loaded with js_import).
 *
 * /invocations without code/inference.py: JSON, JSON lines and CSV bodies are turned into
 * TF Serving REST requests here and sent to the model servers (location /tfs/), so no
 * Python is in the path: the very bytes sagemaker_tfs/service/codecs/text/text_rest.py
 * writes for the same body, or its refusal's status (test/unit/supervisor/test_njs_parity.py).
 * Anything else, a body this cannot convert exactly (HandOver), and a prediction that no
 * model server took on two tries (predictOrHandOver), goes to the Python service
 * (@python_service).
 * /ping: the supervisor's health verdict, read from a file (no model server call).
 * Shedding: an invocation whose timeout passed before it could be sent, or that the model
 * server refused because its batch queue is full, is answered 503 (Retry-After from nginx,
 * $tfs_shed names why, nginx/logging.conf) instead of being sent or retried.
 */
import fs from 'fs';

var JSON_TYPES = ['application/json'];
var JSON_LINES_TYPES = ['application/jsonlines', 'application/jsons', 'application/x-jsonlines'];
var CSV_TYPES = ['text/csv'];
var METHODS = ['predict', 'classify', 'regress'];
/* (?![\s\S]) ends a pattern at the very end of the text: njs compiles patterns with PCRE,
 * where '$' also matches before a final newline. */
var MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.\-]*(?![\s\S])/;
var VERSION = /^[0-9]{1,19}(?![\s\S])/;
var MAX_VERSION = '9223372036854775807';
/* Statuses nginx gives when no model server could take the prediction (one died or restarts). */
var RETRY_STATUSES = [502, 503];
/* Tries made here before a prediction no model server could take goes to the Python service,
 * which resends it on its side (predictOrHandOver). */
var NJS_TRIES = 2;
/* What predictOrHandOver resolves to when the Python service is to take the request. */
var HAND_OVER = {handOver: true};
/* TF Serving's UNAVAILABLE when max_enqueued_batches are queued (its batching scheduler's text). */
var QUEUE_FULL = 'batch scheduling queue to which this task was submitted is full';
var LOOSE_NUMBER = /^[+\-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+\-]?[0-9]+)?$/;

function RequestError(status, message) {
    this.status = status;
    this.message = message;
}

function sendJson(r, status, body) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, body);
}

/* An error may quote client text, and nginx hands njs a header's bytes as they came (maybe not
 * UTF-8): jsonString escapes all but printable ASCII, so the body is always UTF-8 JSON. */
function sendError(r, status, message) {
    sendJson(r, status, '{"error":' + jsonString(message) + '}');
}

/* The headers are read by the rules of sagemaker_tfs/wire/http_headers.py (the tests run both
 * on the same cases): a value loses the spaces and tabs around it (HTTP's optional
 * whitespace) and nothing else (String's trim() also removes other Unicode spaces); media
 * types are lower-cased. */
function trimOws(text) {
    return text.replace(/^[ \t]+|[ \t]+$/g, '');
}

/* 'Application/JSON; charset=utf-8' -> 'application/json' ('' when absent) */
function mediaType(value) {
    if (!value) {
        return '';
    }
    return trimOws(value.split(';')[0]).toLowerCase();
}

/* The media types of an Accept header, in the order listed, empty entries dropped. */
function acceptList(value) {
    return (value || '').split(',').map(mediaType).filter(function (type) {
        return type !== '';
    });
}

/* The first media type of an Accept header ('' when none is listed). */
function firstAccept(value) {
    var types = acceptList(value);
    return types.length > 0 ? types[0] : '';
}

/*
 * The reference container's rule for the model server's JSON: when Accept lists
 * application/json or a JSON lines type, the body is answered on one line (newlines
 * removed) with the first listed type as Content-Type (application/json when the first is
 * a wildcard). null: answer as the model server wrote it (no Accept, or only wildcards).
 */
function oneLineJsonType(acceptHeader) {
    var types = acceptList(acceptHeader);
    var jsonTypes = types.filter(function (type) {
        return JSON_TYPES.indexOf(type) >= 0 || JSON_LINES_TYPES.indexOf(type) >= 0;
    });
    if (jsonTypes.length === 0) {
        return null;
    }
    return jsonTypes.indexOf(types[0]) >= 0 ? types[0] : 'application/json';
}

function acceptHandledHere(accept) {
    return accept === '' || accept === '*/*' || accept === 'application/json' ||
        JSON_LINES_TYPES.indexOf(accept) >= 0;
}

/* tfs-model-name=NAME,tfs-model-version=N,tfs-method=M; other text is ignored. */
function parseCustomAttributes(header) {
    var attributes = {};
    if (!header) {
        return attributes;
    }
    header.split(',').forEach(function (pair) {
        var index = pair.indexOf('=');
        if (index < 0) {
            return;
        }
        var key = trimOws(pair.slice(0, index));
        if (key === 'tfs-model-name' || key === 'tfs-model-version' || key === 'tfs-method') {
            attributes[key] = trimOws(pair.slice(index + 1));
        }
    });
    return attributes;
}

/* A short quote of client input for an error message. */
function excerpt(text) {
    return text.length > 80 ? text.slice(0, 80) + '...' : text;
}

/* A TF Serving version: digits that fit an int64. */
function validVersion(version) {
    if (!VERSION.test(version)) {
        return false;
    }
    var digits = version.replace(/^0+(?=[0-9])/, '');
    return digits.length < MAX_VERSION.length ||
        (digits.length === MAX_VERSION.length && digits <= MAX_VERSION);
}

function tfsUri(r) {
    var attributes = parseCustomAttributes(r.headersIn['X-Amzn-SageMaker-Custom-Attributes']);
    var name = attributes['tfs-model-name'] || r.variables.tfs_default_model;
    var version = attributes['tfs-model-version'];
    var method = attributes['tfs-method'] || 'predict';
    if (!name) {
        throw new RequestError(400, 'No model name: set tfs-model-name in ' +
            'X-Amzn-SageMaker-Custom-Attributes');
    }
    if (!MODEL_NAME.test(name)) {
        throw new RequestError(400, 'Invalid model name: ' + excerpt(name));
    }
    if (version !== undefined && !validVersion(version)) {
        throw new RequestError(400, 'Invalid model version: ' + excerpt(version));
    }
    if (METHODS.indexOf(method) < 0) {
        throw new RequestError(400, 'Invalid method: ' + excerpt(method) +
            ' (expected predict, classify or regress)');
    }
    /* For the log lines (nginx/logging.conf). */
    r.variables.tfs_model = name;
    r.variables.tfs_version = version || '';
    var uri = '/tfs/v1/models/' + name;
    if (version !== undefined) {
        uri += '/versions/' + version;
    }
    return uri + ':' + method;
}

/* Index just past the JSON object or array starting at text[start]. */
function endOfJsonValue(text, start) {
    var depth = 0;
    var inString = false;
    for (var i = start; i < text.length; i++) {
        var c = text[i];
        if (inString) {
            if (c === '\\') {
                i++;
            } else if (c === '"') {
                inString = false;
            }
        } else if (c === '"') {
            inString = true;
        } else if (c === '{' || c === '[') {
            depth++;
        } else if (c === '}' || c === ']') {
            depth--;
            if (depth === 0) {
                return i + 1;
            }
        }
    }
    throw new RequestError(400, 'Invalid JSON lines: unterminated value');
}

var QUOTE = 34;
var BACKSLASH = 92;

/* A JSON string, or a non-finite number's literal (outside strings, then). */
var STRING_OR_NON_FINITE = /"[^"\\]*(?:\\[\s\S][^"\\]*)*"|-?Infinity|NaN/g;

/* The text with each NaN, Infinity and -Infinity outside strings read as null, or null when
 * it has none. null keeps the value's shape (not a list, not an object) and stays invalid
 * where the literal was (-null, 1null, nullx). */
function withNonFiniteAsNull(text) {
    var replaced = false;
    var finite = text.replace(STRING_OR_NON_FINITE, function (match) {
        if (match[0] === '"') {
            return match;
        }
        replaced = true;
        return 'null';
    });
    return replaced ? finite : null;
}

/* A number JSON does not allow (00, 1., .5, -.5) inside a JSON text, but for one at its very
 * start or end (leadingLooseNumber); strings may match too. No group or anchor: each costs
 * njs 0.7.9 time per test (~12 us a test as it is, ~25 with them). */
var LOOSE_JSON_NUMBER = /[^0-9.eE+\-]-?0[0-9]|\.[^0-9]|[^0-9]\./;
var JSON_STRING = /"[^"\\]*(?:\\[\s\S][^"\\]*)*"/g;
var POINT = 46;

/* Whether this engine's JSON.parse takes such numbers (njs 0.7.9 does): the checks below
 * are spent only where they must be. */
var LENIENT_JSON_PARSE = (function () {
    try {
        JSON.parse('[1.]');
        return true;
    } catch (e) {
        return false;
    }
})();

/* .5, 1. or 05 as the whole text (a JSON text may be one number). */
function leadingLooseNumber(text) {
    var i = text.charCodeAt(0) === 45 ? 1 : 0;  /* - */
    return text.charCodeAt(i) === POINT || text.charCodeAt(text.length - 1) === POINT ||
        (text.charCodeAt(i) === DIGIT_0 && isDigit(text.charCodeAt(i + 1)));
}

function mayHaveLooseNumber(text) {
    return leadingLooseNumber(text) || LOOSE_JSON_NUMBER.test(text);
}

/* Whether a JSON text JSON.parse accepted has a number JSON does not allow: looked for again
 * without the insides of its strings, whose other tokens never match. */
function hasLooseNumber(text) {
    return mayHaveLooseNumber(text) && mayHaveLooseNumber(text.replace(JSON_STRING, '""'));
}

/* JSON.parse, NaN and the infinities taken as numbers (withNonFiniteAsNull). */
function parseLenient(text) {
    try {
        return JSON.parse(text);
    } catch (e) {
        var finite = withNonFiniteAsNull(text);
        if (finite === null) {
            throw e;
        }
        try {
            return JSON.parse(finite);
        } catch (ignored) {
            throw e;
        }
    }
}

/*
 * The JSON text's value, read as Python's json (the service's reader) and TF Serving's REST
 * API read it: NaN, Infinity and -Infinity are numbers, 00, 1. and .5 are not (njs 0.7.9's
 * JSON.parse takes them). The value is only looked at for its shape: a non-finite number
 * comes back as null.
 */
function parseJson(text) {
    var value = parseLenient(text);
    if (LENIENT_JSON_PARSE && hasLooseNumber(text)) {
        throw new SyntaxError('a number is not spelled as JSON spells one');
    }
    return value;
}

/* Objects or lists separated only by whitespace -> their texts, each checked by parseJson. */
function splitJsonLines(text) {
    var values = [];
    var i = 0;
    while (i < text.length) {
        var c = text[i];
        if (c === ' ' || c === '\n' || c === '\r' || c === '\t') {
            i++;
            continue;
        }
        if (c !== '{' && c !== '[') {
            throw new RequestError(400, 'Invalid JSON lines: expected an object or a list at ' +
                'offset ' + i);
        }
        var end = endOfJsonValue(text, i);
        var value = text.slice(i, end);
        try {
            parseJson(value);
        } catch (e) {
            throw new RequestError(400, 'Invalid JSON lines: ' + e.message);
        }
        values.push(value);
        i = end;
    }
    if (values.length === 0) {
        throw new RequestError(400, 'Empty request body');
    }
    return values;
}

/* JSON lines when the text is such, else [] (the caller reports its own JSON error). */
function jsonLinesOrNone(text) {
    try {
        return splitJsonLines(text);
    } catch (e) {
        return [];
    }
}

function instancesOf(texts) {
    return '{"instances": [' + texts.join(',') + ']}';
}

function isListOfLists(value) {
    return Array.isArray(value) && value.length > 0 && value.every(Array.isArray);
}

function isTfsRequest(value) {
    return value !== null && typeof value === 'object' && !Array.isArray(value) &&
        ('instances' in value || 'inputs' in value || 'examples' in value);
}

function convertJson(text) {
    if (text.trim() === '') {
        throw new RequestError(400, 'Empty request body');
    }
    var value;
    try {
        value = parseJson(text);
    } catch (e) {
        var lines = jsonLinesOrNone(text);
        if (lines.length < 2) {
            throw new RequestError(400, 'Invalid JSON: ' + e.message);
        }
        return instancesOf(lines);
    }
    if (isTfsRequest(value)) {
        return text;
    }
    if (isListOfLists(value)) {
        return '{"instances": ' + text + '}';
    }
    return instancesOf([text]);
}

var DIGIT_0 = 48;
var DIGIT_1 = 49;
var DIGIT_9 = 57;
var COMMA = 44;
var CARRIAGE_RETURN = 13;

function isDigit(code) {
    return code >= DIGIT_0 && code <= DIGIT_9;
}

function digitsEnd(text, i) {
    while (isDigit(text.charCodeAt(i))) {
        i++;
    }
    return i;
}

/*
 * The index just past the JSON number (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+\-]?[0-9]+)?)
 * starting at text[i], or -1. Read code by code rather than with a pattern: njs keeps the
 * memory of every regular expression match until the request ends (~0.5 KB each), which a CSV
 * of many short fields multiplies.
 */
function strictNumberEnd(text, i) {
    if (text.charCodeAt(i) === 45) {  /* - */
        i++;
    }
    var code = text.charCodeAt(i);
    if (code === DIGIT_0) {
        i++;
    } else if (code >= DIGIT_1 && code <= DIGIT_9) {
        i = digitsEnd(text, i + 1);
    } else {
        return -1;
    }
    if (text.charCodeAt(i) === 46) {  /* . */
        if (!isDigit(text.charCodeAt(i + 1))) {
            return -1;
        }
        i = digitsEnd(text, i + 1);
    }
    code = text.charCodeAt(i);
    if (code === 101 || code === 69) {  /* e E */
        i++;
        code = text.charCodeAt(i);
        if (code === 43 || code === 45) {  /* + - */
            i++;
        }
        if (!isDigit(text.charCodeAt(i))) {
            return -1;
        }
        i = digitsEnd(text, i + 1);
    }
    return i;
}

function isStrictNumber(text) {
    return strictNumberEnd(text, 0) === text.length;
}

/* Could the text start a LOOSE_NUMBER (so that the pattern is worth trying)? */
function mayBeLooseNumber(text) {
    var code = text.charCodeAt(0);
    return isDigit(code) || code === 43 || code === 45 || code === 46;  /* + - . */
}

/* Printable ASCII other than " and backslash: what Python's json.dumps writes as it is. */
function plainAscii(code) {
    return code >= 32 && code <= 126 && code !== QUOTE && code !== BACKSLASH;
}

var SHORT_ESCAPES = {8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r', 34: '\\"',
    92: '\\\\'};

function unicodeEscape(code) {
    return '\\u' + ('000' + code.toString(16)).slice(-4);
}

/* One character (a code point in njs, a UTF-16 unit in Node) as json.dumps escapes it. */
function escapedCharacter(code) {
    if (SHORT_ESCAPES[code] !== undefined) {
        return SHORT_ESCAPES[code];
    }
    if (code > 0xffff) {
        var offset = code - 0x10000;
        return unicodeEscape(0xd800 + (offset >> 10)) + unicodeEscape(0xdc00 + (offset & 0x3ff));
    }
    return unicodeEscape(code);
}

/* Python's json.dumps(text) (ASCII only: every other character escaped, lower-case hex):
 * quoted as it is when no character needs an escape, which costs no memory per character. */
function jsonString(text) {
    var i = 0;
    while (i < text.length && plainAscii(text.charCodeAt(i))) {
        i++;
    }
    if (i === text.length) {
        return '"' + text + '"';
    }
    var pieces = ['"', text.slice(0, i)];
    var from = i;
    for (; i < text.length; i++) {
        var code = text.charCodeAt(i);
        if (!plainAscii(code)) {
            pieces.push(text.slice(from, i), escapedCharacter(code));
            from = i + 1;
        }
    }
    pieces.push(text.slice(from), '"');
    return pieces.join('');
}

function zeros(count) {
    var text = '';
    while (text.length < count) {
        text += '0';
    }
    return text;
}

/* Thrown for a body the service is to convert: nginx hands it over (invocations). */
function HandOver(reason) {
    this.reason = reason;
}

/* The most significant digits a decimal may have for its double's repr to be those digits
 * (DBL_DIG: every decimal of 15 digits survives the round trip through a double), and the
 * exponents of normal doubles. */
var EXACT_DIGITS = 15;
var MIN_EXPONENT = -307;
var MAX_EXPONENT = 307;

/* The significant digits of a LOOSE_NUMBER's text (no sign) and where its decimal point goes:
 * '0012.50e1' -> {digits: '125', point: 3}; digits '' for a zero. Read as text: njs's own
 * number parsing and printing are not always correctly rounded or shortest (njs 0.7.9). */
function looseDecimal(text) {
    var e = text.indexOf('e') >= 0 ? text.indexOf('e') : text.indexOf('E');
    var mantissa = e < 0 ? text : text.slice(0, e);
    var dot = mantissa.indexOf('.');
    var whole = dot < 0 ? mantissa : mantissa.slice(0, dot);
    var digits = whole + (dot < 0 ? '' : mantissa.slice(dot + 1));
    var point = whole.length + (e < 0 ? 0 : parseInt(text.slice(e + 1), 10));
    var first = 0;
    while (first < digits.length && digits.charCodeAt(first) === DIGIT_0) {
        first++;
        point--;
    }
    var last = digits.length;
    while (last > first && digits.charCodeAt(last - 1) === DIGIT_0) {
        last--;
    }
    return {digits: digits.slice(first, last), point: point};
}

/* Python's repr(float(text)) of a LOOSE_NUMBER's text with a point or an exponent: the
 * shortest digits, in exponent form below 1e-4 and from 1e16. A number this cannot write
 * exactly (more than EXACT_DIGITS digits, or beyond normal doubles) is handed over. */
function pythonFloat(text) {
    var sign = text[0] === '-' ? '-' : '';
    var d = looseDecimal(text[0] === '-' || text[0] === '+' ? text.slice(1) : text);
    if (d.digits === '') {
        return sign + '0.0';
    }
    var exponent = d.point - 1;
    if (d.digits.length > EXACT_DIGITS || exponent < MIN_EXPONENT || exponent > MAX_EXPONENT) {
        throw new HandOver('CSV number ' + excerpt(text));
    }
    if (exponent < -4 || exponent >= 16) {
        var size = Math.abs(exponent);
        return sign + d.digits[0] + (d.digits.length > 1 ? '.' + d.digits.slice(1) : '') +
            'e' + (exponent < 0 ? '-' : '+') + (size < 10 ? '0' : '') + size;
    }
    if (d.point <= 0) {
        return sign + '0.' + zeros(-d.point) + d.digits;
    }
    if (d.point >= d.digits.length) {
        return sign + d.digits + zeros(d.point - d.digits.length) + '.0';
    }
    return sign + d.digits.slice(0, d.point) + '.' + d.digits.slice(d.point);
}

/* Python's str(int(text)) of a signed run of digits: no +, no leading zeros, no -0. */
function pythonInteger(text) {
    var sign = text[0] === '-' ? '-' : '';
    var digits = text[0] === '-' || text[0] === '+' ? text.slice(1) : text;
    var first = 0;
    while (first < digits.length - 1 && digits.charCodeAt(first) === DIGIT_0) {
        first++;
    }
    digits = digits.slice(first);
    return digits === '0' ? digits : sign + digits;
}

/* A number CSV spells loosely (+1, .5, 1., 007), as the service writes it: a float's repr
 * when it has a point or an exponent, else the integer. */
function looseNumber(text) {
    if (text.indexOf('.') >= 0 || text.indexOf('e') >= 0 || text.indexOf('E') >= 0) {
        return pythonFloat(text);
    }
    return pythonInteger(text);
}

function csvField(field) {
    var trimmed = field.trim();
    if (isStrictNumber(trimmed)) {
        return trimmed;
    }
    if (mayBeLooseNumber(trimmed) && LOOSE_NUMBER.test(trimmed)) {
        return looseNumber(trimmed);
    }
    if (trimmed.length >= 2 && trimmed[0] === '"' && trimmed[trimmed.length - 1] === '"') {
        trimmed = trimmed.slice(1, -1);
        if (trimmed.indexOf('""') >= 0) {
            trimmed = trimmed.split('""').join('"');
        }
    }
    return jsonString(trimmed);
}

function fieldCount(row) {
    var count = 1;
    for (var i = row.indexOf(','); i >= 0; i = row.indexOf(',', i + 1)) {
        count++;
    }
    return count;
}

/* The number of fields of a row of strict numbers and commas only (the row is then its own
 * JSON list), or -1 for any other row. */
function plainFieldCount(row) {
    var count = 0;
    var i = 0;
    for (;;) {
        i = strictNumberEnd(row, i);
        if (i < 0) {
            return -1;
        }
        count++;
        if (i === row.length) {
            return count;
        }
        if (row.charCodeAt(i) !== COMMA) {
            return -1;
        }
        i++;
    }
}

/* One CSV row's instance (a JSON list, or a value when rows have one field), appended to the
 * request's pieces (no list or string per row or field beyond them). */
function appendCsvInstance(pieces, row, width, number) {
    var plain = plainFieldCount(row);
    var count = plain < 0 ? fieldCount(row) : plain;
    if (count !== width) {
        throw new RequestError(400, 'Invalid CSV: row ' + number + ' has ' + count +
            ' fields, expected ' + width);
    }
    if (width === 1) {
        pieces.push(plain < 0 ? csvField(row) : row);
        return;
    }
    if (plain >= 0) {
        pieces.push('[', row, ']');
        return;
    }
    pieces.push('[');
    var start = 0;
    for (var field = 0; field < width; field++) {
        var end = field === width - 1 ? row.length : row.indexOf(',', start);
        if (field > 0) {
            pieces.push(',');
        }
        pieces.push(csvField(row.slice(start, end)));
        start = end + 1;
    }
    pieces.push(']');
}

/*
 * CSV rows (blank lines skipped, a final \r dropped) as the instances of TF Serving's request.
 * The text is walked once and the request joined once: njs frees nothing until the request
 * ends, so every intermediate string or list per row stays allocated.
 */
/*
 * The body as text: njs 0.7 reads it as a byte string, whose characters are its bytes (so
 * trim() would keep a UTF-8 byte order mark or no-break space); njs 0.8 reads it as text.
 */
function unicodeText(text) {
    if (typeof text.fromUTF8 !== 'function') {
        return text;
    }
    var decoded = text.fromUTF8();
    if (decoded === null) {
        throw new RequestError(400, 'Invalid CSV: the request body is not UTF-8');
    }
    return decoded;
}

function convertCsv(body) {
    var text = unicodeText(body);
    var pieces = ['{"instances": ['];
    var width = 0;
    var rows = 0;
    var start = 0;
    while (start < text.length) {
        var end = text.indexOf('\n', start);
        if (end < 0) {
            end = text.length;
        }
        var stop = end > start && text.charCodeAt(end - 1) === CARRIAGE_RETURN ? end - 1 : end;
        var row = text.slice(start, stop);
        start = end + 1;
        if (row.trim() === '') {
            continue;
        }
        rows++;
        if (rows === 1) {
            width = fieldCount(row);
        } else {
            pieces.push(',');
        }
        appendCsvInstance(pieces, row, width, rows);
    }
    if (rows === 0) {
        throw new RequestError(400, 'Empty request body');
    }
    pieces.push(']}');
    return pieces.join('');
}

function convertedHere(contentType) {
    return contentType === '' || JSON_TYPES.indexOf(contentType) >= 0 ||
        JSON_LINES_TYPES.indexOf(contentType) >= 0 || CSV_TYPES.indexOf(contentType) >= 0;
}

/* The TF Serving request body for a content type that convertedHere accepts. */
function convert(contentType, text) {
    if (JSON_LINES_TYPES.indexOf(contentType) >= 0) {
        return instancesOf(splitJsonLines(text));
    }
    if (CSV_TYPES.indexOf(contentType) >= 0) {
        return convertCsv(text);
    }
    return convertJson(text);
}

function looksLikeJson(text) {
    try {
        JSON.parse(text);
        return true;
    } catch (e) {
        return false;
    }
}

function sendModelServerReply(r, reply, acceptHeader) {
    var body = reply.responseText || '';
    if (reply.status >= 500 && !looksLikeJson(body)) {
        sendError(r, 503, 'The model server is not available (status ' + reply.status + ')');
        return;
    }
    var oneLineType = oneLineJsonType(acceptHeader);
    if (oneLineType !== null) {
        r.headersOut['Content-Type'] = oneLineType;
        r.return(reply.status, body.replace(/\n/g, ''));
        return;
    }
    sendJson(r, reply.status, body);
}

/* A 503 that sheds the invocation; nginx adds Retry-After and counts it by reason. */
function shed(r, reason, message) {
    r.variables.tfs_shed = reason;
    sendError(r, 503, message);
}

/* Seconds since the request's first byte, or -1 when nginx cannot tell. */
function secondsWaited(r) {
    var waited = parseFloat(r.variables.request_time);
    return isNaN(waited) ? -1 : waited;
}

/* Whether the invocation timeout ($tfs_invocation_timeout) passed since its arrival. */
function expired(r) {
    var timeout = parseFloat(r.variables.tfs_invocation_timeout);
    return !isNaN(timeout) && secondsWaited(r) >= timeout;
}

function shedExpired(r) {
    shed(r, 'expired', 'The endpoint is overloaded: the request waited ' + secondsWaited(r) +
        ' s, past the invocation timeout (' + r.variables.tfs_invocation_timeout +
        ' s); retry later');
}

function queueFull(reply) {
    return reply.status === 503 && (reply.responseText || '').indexOf(QUEUE_FULL) >= 0;
}

function handleError(r, e) {
    if (e instanceof RequestError) {
        sendError(r, e.status, e.message);
    } else {
        r.error('tensorflow_serving.js: ' + e);
        sendError(r, 500, 'Internal error: ' + e);
    }
}

var MB = 1024 * 1024;

function textTooLarge(limitMb) {
    return new RequestError(413, 'JSON, JSON lines and CSV bodies are converted up to ' +
        limitMb + ' MB (SAGEMAKER_TFS_MAX_TEXT_BODY_MB): send larger inputs as ' +
        'application/x-npy or application/x-npz, or raise SAGEMAKER_TFS_MAX_TEXT_BODY_MB');
}

/*
 * The body's text when njs is to convert it here, else null: a body over the njs limit, or
 * in a file (nginx keeps larger bodies in one), goes to the Python service, which converts
 * it too. Throws the 413 for a body over the text limit.
 */
function textConvertedHere(r) {
    var declared = parseInt(r.headersIn['Content-Length'] || '0', 10);
    var limitMb = parseInt(r.variables.tfs_text_limit_mb, 10);
    if (declared > limitMb * MB) {
        throw textTooLarge(limitMb);
    }
    var njsLimit = parseInt(r.variables.tfs_njs_text_limit, 10);
    if (declared > njsLimit) {
        return null;
    }
    var text;
    try {
        text = r.requestText;
    } catch (e) {  /* "request body is in a file" */
        return null;
    }
    if (text === undefined) {
        return declared > 0 ? null : '';
    }
    return text.length > njsLimit ? null : text;
}

function invocations(r) {
    if (r.method !== 'POST') {
        sendError(r, 405, 'Method ' + r.method + ' not allowed: use POST');
        return;
    }
    var contentType = mediaType(r.headersIn['Content-Type']);
    var accept = firstAccept(r.headersIn.Accept);
    if (!acceptHandledHere(accept) || !convertedHere(contentType)) {
        r.internalRedirect('@python_service');  /* binary bodies are not read as text here */
        return;
    }
    var uri;
    var body;
    try {
        /* The target first, as the service reads it: a bad body is counted for its model. */
        uri = tfsUri(r);
        var text = textConvertedHere(r);
        if (text === null) {
            r.internalRedirect('@python_service');
            return;
        }
        body = convert(contentType, text);
    } catch (e) {
        if (e instanceof HandOver) {
            r.internalRedirect('@python_service');
        } else {
            handleError(r, e);
        }
        return;
    }
    if (expired(r)) {
        shedExpired(r);
        return;
    }
    predictOrHandOver(r, uri, body, 0)
        .then(function (reply) {
            if (reply === null) {
                shedExpired(r);
                return;
            }
            if (reply === HAND_OVER) {
                r.internalRedirect('@python_service');
                return;
            }
            r.variables.tfs_model_server_time = reply.variables.upstream_response_time || '';
            if (queueFull(reply)) {
                shed(r, 'queue_full', 'The endpoint is overloaded: the model server\'s batch ' +
                    'queue is full (max_enqueued_batches); retry later');
                return;
            }
            sendModelServerReply(r, reply, r.headersIn.Accept);
        })
        .catch(function (e) {
            handleError(r, e);
        });
}

/*
 * Predictions are idempotent: one whose model server died or is restarting is sent again at
 * once (nginx skips a model server that just failed, so it goes to a live one). If that one
 * is refused too, no model server can take it now, and the request goes to the Python service
 * (HAND_OVER), which converts the same body and resends it every 100 ms for up to 10 s
 * (model_servers.Failover). The waiting is not done here: nginx cannot tell njs that a
 * client closed its connection (njs's subrequests are background ones and the main request's
 * reading is blocked while njs holds it), so a request whose client had gone kept its
 * admission slot (SAGEMAKER_TFS_MAX_CONCURRENT_INVOCATIONS) for the whole 10 s; proxied to
 * the service, nginx sees the close and frees the slot at once. Not with proxy_next_upstream
 * non_idempotent: nginx resending a subrequest's body after a reset failed with EFAULT (njs
 * 0.7.9). A full batch queue is not resent (the model server is alive and busy), nor is an
 * invocation past its timeout (resolves to null).
 */
function predictOrHandOver(r, uri, body, attempt) {
    if (attempt > 0 && expired(r)) {
        return Promise.resolve(null);
    }
    return r.subrequest(uri, {method: 'POST', body: body}).then(function (reply) {
        if (RETRY_STATUSES.indexOf(reply.status) < 0 || queueFull(reply)) {
            return reply;
        }
        if (attempt + 1 >= NJS_TRIES) {
            return HAND_OVER;
        }
        return predictOrHandOver(r, uri, body, attempt + 1);
    });
}

/* The supervisor's health verdict (supervisor/model_servers/health.py): {"healthy", "error", "written_at"}.
 * Read from its file for each /ping (a few microseconds), never from a model server. */
function readVerdict(path) {
    try {
        return JSON.parse(fs.readFileSync(path, 'utf8'));
    } catch (e) {
        return null;
    }
}

function ping(r) {
    var verdict = readVerdict(r.variables.tfs_health_file);
    if (verdict === null || typeof verdict.written_at !== 'number') {
        sendError(r, 503, 'The endpoint is starting: no health verdict yet');
        return;
    }
    var age = Date.now() / 1000 - verdict.written_at;
    if (age > Number(r.variables.tfs_health_max_age)) {
        sendError(r, 503, 'The health verdict is ' + Math.round(age) +
                  ' s old: the supervisor no longer checks the model servers');
        return;
    }
    if (verdict.healthy === true) {
        sendJson(r, 200, '{}');
    } else {
        sendError(r, 503, String(verdict.error || 'Not healthy'));
    }
}

export default {
    invocations, ping, convert, mediaType, acceptList, firstAccept, parseCustomAttributes,
    oneLineJsonType, validVersion, MODEL_NAME
};
