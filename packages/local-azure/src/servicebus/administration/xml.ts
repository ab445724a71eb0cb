/**
 * The little XML the administration endpoint reads and writes: ATOM entries whose content is one
 * Service Bus description (QueueDescription, TopicDescription, SubscriptionDescription,
 * RuleDescription), as @azure/service-bus writes them with @azure/core-xml.
 *
 * The reader is purpose-built for that flat format and for untrusted input: one pass over the text
 * with an explicit stack (no recursion), elements nested at most MAX_DEPTH deep and at most
 * MAX_ELEMENTS in all, no DTDs or processing of entities beyond XML's five and character
 * references. Anything else is an XmlError, which the endpoint answers with 400.
 */
export interface XmlElement {
  /** The local name, without its namespace prefix. */
  readonly name: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly children: XmlElement[];
  /** The element's own text (its children's is theirs), entities decoded. */
  text: string;
}

export class XmlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'XmlError';
  }
}

const MAX_DEPTH = 16;
const MAX_ELEMENTS = 4096;
const NAME = /^[A-Za-z_][\w.:-]*/;
const ATTRIBUTE = /^\s+([A-Za-z_][\w.:-]*)\s*=\s*("[^"<]*"|'[^'<]*')/;

/** The document's root element. */
export function readXml(text: string): XmlElement {
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  let count = 0;
  let at = 0;
  while (at < text.length) {
    const open = text.indexOf('<', at);
    const chunk = open === -1 ? text.slice(at) : text.slice(at, open);
    const parent = stack.at(-1);
    if (parent) parent.text += decodeEntities(chunk);
    else if (chunk.trim() !== '') throw new XmlError('There is text outside the root element.');
    if (open === -1) break;
    if (text.startsWith('<?', open)) {
      at = after(text, '?>', open);
    } else if (text.startsWith('<!--', open)) {
      at = after(text, '-->', open);
    } else if (text.startsWith('<![CDATA[', open)) {
      if (!parent) throw new XmlError('CDATA outside the root element.');
      const end = after(text, ']]>', open);
      parent.text += text.slice(open + 9, end - 3);
      at = end;
    } else if (text.startsWith('<!', open)) {
      throw new XmlError('Document type declarations are not accepted.');
    } else if (text.startsWith('</', open)) {
      const end = after(text, '>', open);
      const name = localName(text.slice(open + 2, end - 1).trim());
      const closed = stack.pop();
      if (!closed || closed.name !== name) throw new XmlError('An end tag does not match its start tag.');
      at = end;
    } else {
      const end = after(text, '>', open);
      const tag = text.slice(open + 1, end - 1);
      const selfClosing = tag.endsWith('/');
      const element = parseStartTag(selfClosing ? tag.slice(0, -1) : tag);
      if (++count > MAX_ELEMENTS) throw new XmlError(`The document has more than ${MAX_ELEMENTS} elements.`);
      if (parent) parent.children.push(element);
      else if (root) throw new XmlError('The document has more than one root element.');
      else root = element;
      if (!selfClosing) {
        if (stack.length >= MAX_DEPTH) throw new XmlError(`Elements are nested deeper than ${MAX_DEPTH}.`);
        stack.push(element);
      }
      at = end;
    }
  }
  if (!root || stack.length > 0) throw new XmlError('The document is not complete XML.');
  return root;
}

/** The first child of that local name. */
export function childOf(element: XmlElement | undefined, name: string): XmlElement | undefined {
  return element?.children.find((child) => child.name === name);
}

/** The text of the first child of that local name, trimmed; undefined when there is none. */
export function textOf(element: XmlElement | undefined, name: string): string | undefined {
  return childOf(element, name)?.text.trim();
}

/** Text and attribute values escaped for XML. */
export function escapeXml(value: string): string {
  return value.replace(
    /[<>&"']/g,
    (c) => `&${{ '<': 'lt', '>': 'gt', '&': 'amp', '"': 'quot', "'": 'apos' }[c]};`,
  );
}

function parseStartTag(tag: string): XmlElement {
  const name = NAME.exec(tag)?.[0];
  if (name === undefined) throw new XmlError('A start tag has no name.');
  const attributes: Record<string, string> = {};
  let rest = tag.slice(name.length);
  for (let match = ATTRIBUTE.exec(rest); match; match = ATTRIBUTE.exec(rest)) {
    attributes[match[1]!] = decodeEntities(match[2]!.slice(1, -1));
    rest = rest.slice(match[0].length);
  }
  if (rest.trim() !== '') throw new XmlError('A start tag is malformed.');
  return { name: localName(name), attributes, children: [], text: '' };
}

function localName(name: string): string {
  return name.slice(name.indexOf(':') + 1);
}

function after(text: string, terminator: string, from: number): number {
  const at = text.indexOf(terminator, from);
  if (at === -1) throw new XmlError('The document ends inside a tag.');
  return at + terminator.length;
}

const ENTITIES: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]{1,6}|#\d{1,7}|[a-z]{2,4});/g, (whole, entity: string) => {
    if (entity.startsWith('#')) {
      const code = entity[1] === 'x' ? parseInt(entity.slice(2), 16) : parseInt(entity.slice(1), 10);
      return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    const decoded = ENTITIES[entity];
    if (decoded === undefined) throw new XmlError('The document uses an entity XML does not define.');
    return decoded;
  });
}
