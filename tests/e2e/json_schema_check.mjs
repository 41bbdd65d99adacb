// A small JSON Schema validator for the structured output tests: the keywords the corpus uses, with standard
// JSON Schema semantics (not the server's: additionalProperties defaults to true here, oneOf means exactly one).
// validate(schema, value) returns a list of problems, empty when the value is valid.
const FORMATS = {
  date: /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/,
  time: /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/,
  'date-time': /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/,
  uuid: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
  ipv4: /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/,
  email: /^[^\s@]+@[^\s@]+\.[^\s@]+$/,
};

function typeOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function deepEqual(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function resolve(root, ref) {
  if (!ref.startsWith('#')) throw new Error(`unsupported $ref ${ref}`);
  return ref.slice(1).split('/').filter(Boolean).reduce((node, key) => node[key.replace(/~1/g, '/').replace(/~0/g, '~')], root);
}

export function validate(schema, value, root = schema, path = '$') {
  if (schema === true) return [];
  if (schema === false) return [`${path}: false schema`];
  const problems = [];
  const fail = (what) => problems.push(`${path}: ${what}`);
  if (schema.$ref) problems.push(...validate(resolve(root, schema.$ref), value, root, path));
  if (schema.allOf) for (const sub of schema.allOf) problems.push(...validate(sub, value, root, path));
  if (schema.anyOf && !schema.anyOf.some((sub) => validate(sub, value, root, path).length === 0)) fail('no anyOf branch');
  if (schema.oneOf && schema.oneOf.filter((sub) => validate(sub, value, root, path).length === 0).length !== 1)
    fail('not exactly one oneOf branch');
  if ('const' in schema && !deepEqual(schema.const, value)) fail(`not const ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.some((v) => deepEqual(v, value))) fail(`not in enum`);
  const type = typeOf(value);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => t === type || (t === 'number' && type === 'integer'))) fail(`type ${type}, want ${types}`);
  }
  if (type === 'string') {
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength) fail(`shorter than ${schema.minLength}`);
    if (schema.maxLength !== undefined && length > schema.maxLength) fail(`longer than ${schema.maxLength}`);
    if (schema.pattern && !new RegExp(schema.pattern, 'u').test(value)) fail(`does not match ${schema.pattern}`);
    if (schema.format && FORMATS[schema.format] && !FORMATS[schema.format].test(value)) fail(`not a ${schema.format}`);
  }
  if (type === 'number' || type === 'integer') {
    if (!Number.isFinite(value)) fail('not finite');
    if (schema.minimum !== undefined && value < schema.minimum) fail(`below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) fail(`above ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) fail('not above exclusiveMinimum');
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) fail('not below exclusiveMaximum');
  }
  if (type === 'array') {
    if (schema.minItems !== undefined && value.length < schema.minItems) fail(`fewer than ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) fail(`more than ${schema.maxItems} items`);
    const prefix = schema.prefixItems ?? [];
    value.forEach((item, i) => {
      const sub = i < prefix.length ? prefix[i] : (schema.items ?? true);
      problems.push(...validate(sub, item, root, `${path}[${i}]`));
    });
  }
  if (type === 'object') {
    const properties = schema.properties ?? {};
    for (const name of schema.required ?? []) if (!(name in value)) fail(`missing ${name}`);
    for (const [name, item] of Object.entries(value)) {
      if (name in properties) problems.push(...validate(properties[name], item, root, `${path}.${name}`));
      else if (schema.additionalProperties !== undefined)
        problems.push(...validate(schema.additionalProperties, item, root, `${path}.${name}`));
    }
  }
  return problems;
}
