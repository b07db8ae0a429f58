// Code-mode bootstrap, evaluated once in every fresh QuickJS context (one per cell).
//
// The expression evaluates to a single `entry(op, a, b)` function that Python keeps;
// nothing is left on globalThis. JavaScript never calls into Python: host functions
// (`tools.*`, `setTimeout`) push `{id, op, args}` requests into a private outbox and
// return pending promises whose resolve/reject functions wait in `pending` until the
// host settles them with `entry("resolve" | "reject", id, ...)`. Synchronous helpers
// (`text`, `image`, `notify`, `yield_control`) append events to a private output list.
// Every value handed back to Python is a JSON string (QuickJS rope strings cannot cross
// the binding, JSON.stringify always produces flat ones).
(() => {
  "use strict";
  const jsonParse = JSON.parse;
  const jsonStringify = JSON.stringify;
  const PromiseCtor = Promise;
  const ProxyCtor = Proxy;
  const MapCtor = Map;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const freeze = Object.freeze;
  const hasOwn = Object.hasOwn;
  const objectPrototype = Object.prototype;
  const indirectEval = eval;
  const SyntaxErrorCtor = SyntaxError;
  const reflectApply = Reflect.apply;
  const functionToString = Function.prototype.toString;
  const promiseThen = Promise.prototype.then;

  // No shared memory or blocking primitives in cells (as nanocodex).
  delete globalThis.Atomics;
  delete globalThis.SharedArrayBuffer;
  delete globalThis.WebAssembly;

  const EXIT = Symbol("exit");
  const IMAGE_DETAILS = new Set(["auto", "low", "high", "original"]);
  const REMOTE_IMAGE_PLACEHOLDER =
    "image content omitted because remote image URLs are not supported";
  const IMAGE_EXPECTS =
    "image expects a base64 data URL string, an object with image_url and optional detail, " +
    "or an MCP image block";
  const PARAMS = [
    "tools", "ALL_TOOLS", "text", "image", "notify", "store", "load",
    "yield_control", "exit", "setTimeout", "clearTimeout", "console",
  ];

  const WRAPPER_PREFIX = `(async function (${PARAMS.join(", ")}) {`;

  let outbox = [];
  let outputs = [];
  const pending = new MapCtor();
  let nextRequestId = 1;
  const state = { status: "running", error: null, stored: {} };
  let stored = new MapCtor();
  const storedWrites = new MapCtor();
  const timers = new MapCtor();
  let nextTimerId = 1;

  function request(op, args) {
    const id = nextRequestId++;
    outbox[outbox.length] = { id, op, args };
    const promise = new PromiseCtor((resolve, reject) => {
      pending.set(id, { resolve, reject });
    });
    return [id, promise];
  }

  function emit(event) {
    outputs[outputs.length] = event;
  }

  function stringify(value) {
    const kind = typeof value;
    if (value === undefined || value === null || kind === "boolean" || kind === "number" ||
        kind === "bigint" || kind === "string") {
      return String(value);
    }
    const encoded = jsonStringify(value);
    return encoded === undefined ? String(value) : encoded;
  }

  // A TypeError for misuse of a helper, without the helper's own frames on its stack.
  function usageError(message, internalFrames = 2) {
    const error = new TypeErrorCtor(message);
    if (typeof error.stack === "string") {
      error.stack = error.stack.split("\n").slice(internalFrames).join("\n");
    }
    return error;
  }

  // Drop the bootstrap frames (`start` called by `entry`, and the `eval` that compiled
  // the cell) below the cell's own frames.
  function userStack(stack) {
    const lines = stack.split("\n");
    for (let i = 0; i + 1 < lines.length; i++) {
      if (lines[i].startsWith("    at start (") && lines[i + 1].startsWith("    at entry (")) {
        const end = i > 0 && lines[i - 1] === "    at eval (native)" ? i - 1 : i;
        return fixColumns(lines.slice(0, end).join("\n"));
      }
    }
    return fixColumns(stack);
  }

  // The cell's first line shares its line with the wrapper prefix: report its columns
  // relative to the model's source.
  function fixColumns(stack) {
    return stack.replace(/<input>:1:(\d+)/g, (match, column) => {
      const shifted = Number(column) - WRAPPER_PREFIX.length;
      return shifted >= 0 ? `<input>:1:${Math.max(shifted, 1)}` : match;
    });
  }

  function errorText(error) {
    if (error === null || error === undefined) return String(error);
    if (typeof error !== "object" && typeof error !== "function") return String(error);
    const name = typeof error.name === "string" ? error.name : "";
    const message = error.message === undefined || error.message === null ? "" : `${error.message}`;
    const label = name && message ? `${name}: ${message}` : name || message;
    const stack = typeof error.stack === "string" ? userStack(error.stack).trimEnd() : "";
    if (stack && label && !stack.startsWith(label)) return `${label}\n${stack}`;
    return stack || label || stringify(error);
  }

  function finish() {
    if (state.status !== "running") return;
    state.status = "completed";
    state.stored = Object.fromEntries(storedWrites);
  }

  function fail(error) {
    if (error === EXIT) {
      finish();
      return;
    }
    if (state.status !== "running") return;
    let message;
    try {
      message = String(errorText(error)).trimEnd();
    } catch {
      message = "uncaught exception (unprintable)";
    }
    state.status = "failed";
    state.error = message;
    state.stored = Object.fromEntries(storedWrites);
  }

  function jsonCopy(value) {
    const encoded = jsonStringify(value);
    return encoded === undefined ? undefined : jsonParse(encoded);
  }

  // ---- globals handed to the cell --------------------------------------------------

  function callTool(name, input) {
    let copy;
    try {
      copy = input === undefined ? null : jsonCopy(input);
    } catch (error) {
      return PromiseCtor.reject(usageError(
        `tools.${name} input must be JSON-serialisable: ${errorText(error)}`, 3));
    }
    return request("tool", { name, input: copy === undefined ? null : copy })[1];
  }

  function buildTools(definitions) {
    const declared = Object.create(null);
    for (const definition of definitions) {
      if (hasOwn(declared, definition.js_name)) continue;
      declared[definition.js_name] = (input) => callTool(
        definition.name,
        input === undefined && definition.is_function ? {} : input,
      );
    }
    freeze(declared);
    // Names that are not declared still call the host (deferred tools); the host
    // answers unknown names with a rejection. `then`, `toJSON` and Object.prototype
    // names are left alone so that `await tools`, JSON and string conversion behave.
    return new ProxyCtor(declared, {
      get(target, property) {
        if (typeof property !== "string") return undefined;
        if (hasOwn(target, property)) return target[property];
        if (property === "then" || property === "toJSON" || property in objectPrototype) {
          return undefined;
        }
        return (input) => callTool(property, input);
      },
    });
  }

  function text(value) {
    emit({ kind: "content", item: { type: "input_text", text: stringify(value) } });
  }

  function image(value, detail) {
    let imageUrl;
    let embeddedDetail;
    let hint;  // a generated image's output_hint: shown after it, as nanocodex's tool output does
    if (typeof value === "string") {
      imageUrl = value;
    } else if (value && typeof value === "object" && !Array.isArray(value) &&
               hasOwn(value, "image_url")) {
      if (typeof value.image_url !== "string") throw usageError(IMAGE_EXPECTS);
      imageUrl = value.image_url;
      embeddedDetail = value.detail;
      if (typeof value.output_hint === "string" && value.output_hint) hint = value.output_hint;
    } else if (value && typeof value === "object" && value.type === "image" &&
               typeof value.data === "string" && value.data) {
      const mime = typeof value.mimeType === "string" && value.mimeType
        ? value.mimeType : "application/octet-stream";
      imageUrl = value.data.toLowerCase().startsWith("data:")
        ? value.data : `data:${mime};base64,${value.data}`;
      const metadataDetail = value._meta && value._meta["codex/imageDetail"];
      if (IMAGE_DETAILS.has(metadataDetail)) embeddedDetail = metadataDetail;
    } else {
      throw usageError(IMAGE_EXPECTS);
    }
    const selected = detail ?? embeddedDetail ?? "high";
    if (typeof selected !== "string" || !IMAGE_DETAILS.has(selected.toLowerCase())) {
      throw usageError("image detail must be one of: auto, low, high, original");
    }
    const scheme = imageUrl.slice(0, Math.max(imageUrl.indexOf(":"), 0)).toLowerCase();
    if (scheme === "http" || scheme === "https") {
      text(REMOTE_IMAGE_PLACEHOLDER);
      return;
    }
    if (scheme !== "data" || imageUrl.indexOf(",") < 0) {
      throw usageError(
        "image expects a base64 data URL (data:image/png;base64,...); other URLs are not supported");
    }
    const item = { type: "input_image", image_url: imageUrl };
    const normalized = selected.toLowerCase();
    if (normalized !== "original") item.detail = normalized;
    emit({ kind: "content", item });
    if (hint !== undefined) text(hint);
  }

  function notify(value) {
    const notification = stringify(value);
    if (!notification.trim()) throw usageError("notify expects non-empty text");
    emit({ kind: "notify", text: notification });
  }

  function yield_control() {
    emit({ kind: "yield" });
  }

  function exit() {
    throw EXIT;
  }

  function store(key, value) {
    const normalizedKey = `${key}`;
    const copy = jsonCopy(value);
    if (copy === undefined) {
      throw usageError(
        `Unable to store ${jsonStringify(normalizedKey)}. Only plain serializable values can be stored.`);
    }
    stored.set(normalizedKey, copy);
    storedWrites.set(normalizedKey, copy);
  }

  function load(key) {
    const normalizedKey = `${key}`;
    return stored.has(normalizedKey) ? jsonCopy(stored.get(normalizedKey)) : undefined;
  }

  function setTimeout(callback, delay, ...args) {
    if (typeof callback !== "function") {
      throw usageError("setTimeout expects a function as its first argument");
    }
    let ms = Number(delay);
    if (!(ms >= 0)) ms = 0;
    const [requestId, promise] = request("sleep", ms);
    const timerId = nextTimerId++;
    timers.set(timerId, requestId);
    reflectApply(promiseThen, promise, [() => {
      if (!timers.delete(timerId)) return;
      try {
        callback(...args);
      } catch (error) {
        fail(error); // an uncaught exception in a timer ends the cell, as in Node
      }
    }]);
    return timerId;
  }

  function clearTimeout(timerId) {
    const requestId = timers.get(timerId);
    if (requestId === undefined) return;
    timers.delete(timerId);
    pending.delete(requestId);
    outbox[outbox.length] = { id: requestId, op: "cancel", args: null };
  }

  function consoleMethod(...values) {
    text(values.map((value) => typeof value === "string" ? value : stringify(value)).join(" "));
  }
  const consoleObject = freeze({
    log: consoleMethod, info: consoleMethod, warn: consoleMethod, error: consoleMethod,
    debug: consoleMethod,
  });

  // ---- host entry points -----------------------------------------------------------

  function start(source, configJson) {
    const config = jsonParse(configJson);
    stored = new MapCtor(Object.entries(config.stored));
    const tools = buildTools(config.tools);
    const allTools = freeze(config.tools.map(
      (tool) => freeze({ name: tool.js_name, description: tool.description })));
    // The wrapper keeps the model's line numbers in stacks. Comparing the evaluated
    // function's source text with the wrapper guarantees that `source` was a single
    // function body (a `})` break-out would yield a different function).
    const wrapper = `${WRAPPER_PREFIX.slice(1)}${source}\n}`;
    let script;
    try {
      script = indirectEval(`(${wrapper})`);
    } catch (error) {
      fail(error);
      return;
    }
    if (typeof script !== "function" || reflectApply(functionToString, script, []) !== wrapper) {
      const error = new SyntaxErrorCtor("unbalanced braces: exec source must be a function body");
      error.stack = "";
      fail(error);
      return;
    }
    const main = script(
      tools, allTools, text, image, notify, store, load, yield_control, exit,
      setTimeout, clearTimeout, consoleObject,
    );
    // The captured `then`: the script may have replaced Promise.prototype.then.
    reflectApply(promiseThen, main, [finish, fail]);
  }

  function settle(id, fulfilled, payload) {
    const entry = pending.get(id);
    if (entry === undefined) return;
    pending.delete(id);
    if (fulfilled) {
      entry.resolve(payload === undefined ? undefined : jsonParse(payload));
    } else {
      const error = new ErrorCtor(payload);
      error.stack = ""; // the host stack would only show bootstrap internals
      entry.reject(error);
    }
  }

  function take(kind) {
    let taken;
    if (kind === "outbox") {
      taken = outbox;
      outbox = [];
    } else {
      taken = outputs;
      outputs = [];
    }
    return jsonStringify(taken);
  }

  return function entry(op, a, b) {
    switch (op) {
      case "start": start(a, b); return undefined;
      case "resolve": settle(a, true, b); return undefined;
      case "reject": settle(a, false, b); return undefined;
      case "drain": return take("outbox");
      case "take": return take("outputs");
      case "state": return jsonStringify(state);
      default: throw new ErrorCtor(`unknown code-mode entry op ${op}`);
    }
  };
})()
