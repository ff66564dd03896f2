// Screenshot sizing. Models see images downscaled anyway; sending more pixels costs tokens
// and frame bytes for nothing. Defaults follow the common 1568 px / 1.15 MP rule.

export const MAX_SIDE = 1568;
export const MAX_PIXELS = 1_150_000;
// The gateway accepts 8 MiB frames; stay well below after base64 (x4/3) and the JSON envelope.
export const MAX_BASE64 = 6 * 1024 * 1024;
// The JPEG quality screenshots are captured at, so one that needs no resizing is sent as Chrome encoded it.
export const JPEG_QUALITY = 0.7;
// A JPEG's frame header (its size) comes after its tables: within this much of the start for any capture.
const HEADER_SCAN = 64 * 1024; // base64 characters

/** Target size for a w x h capture. Pure, so it is easy to reason about. */
export function fitSize(w, h, full = false) {
  if (full) return { width: w, height: h };
  let scale = Math.min(1, MAX_SIDE / Math.max(w, h));
  if (w * h * scale * scale > MAX_PIXELS) scale = Math.sqrt(MAX_PIXELS / (w * h));
  // The epsilon keeps 3000 * (1568 / 3000) from flooring to 1567.
  const side = (n) => Math.max(1, Math.floor(n * scale + 1e-9));
  return { width: side(w), height: side(h) };
}

function toBase64(buffer) {
  const bytes = new Uint8Array(buffer);
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

function fromBase64(b64) {
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** A JPEG's pixel size from its start-of-frame header; null when `bytes` holds none (not a JPEG, cut short). */
export function jpegSize(bytes) {
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== 0xd8) return null;
  let i = 2;
  while (i + 9 <= bytes.length) {
    if (bytes[i] !== 0xff) return null;
    const marker = bytes[i + 1];
    if (marker === 0xff) {
      i++; // fill byte
      continue;
    }
    // SOF0-SOF15 except DHT (C4), JPG (C8) and DAC (CC): height then width after the precision byte.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: (bytes[i + 5] << 8) | bytes[i + 6], width: (bytes[i + 7] << 8) | bytes[i + 8] };
    }
    if (marker === 0xd9 || marker === 0xda) return null; // end of image, or scan data before any frame
    i += 2 + ((bytes[i + 2] << 8) | bytes[i + 3]);
  }
  return null;
}

/**
 * A captured data URL as a JPEG within the size rules; returns {data, width, height, bytes}. A JPEG capture
 * already within them (taken at JPEG_QUALITY) is sent as it is: decoding and encoding it again would only
 * cost time and detail.
 */
export async function encodeJpeg(dataUrl, { full = false, quality = JPEG_QUALITY } = {}) {
  // Decoded by hand: the extension's CSP (connect-src) does not allow fetching data: URLs.
  const comma = dataUrl.indexOf(',');
  const type = dataUrl.slice(5, dataUrl.indexOf(';')) || 'image/jpeg';
  const b64 = dataUrl.slice(comma + 1);
  if (type === 'image/jpeg' && b64.length <= MAX_BASE64) {
    // Only the start is decoded to read the size (HEADER_SCAN is a whole number of base64 quads).
    const size = jpegSize(fromBase64(b64.slice(0, HEADER_SCAN)));
    if (size) {
      const fit = fitSize(size.width, size.height, full);
      if (fit.width === size.width && fit.height === size.height) {
        const padding = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
        return { data: b64, width: size.width, height: size.height, bytes: (b64.length / 4) * 3 - padding };
      }
    }
  }
  const bytes = fromBase64(b64);
  const blob = new Blob([bytes], { type });
  const bitmap = await createImageBitmap(blob);
  let { width, height } = fitSize(bitmap.width, bitmap.height, full);
  let q = quality;
  for (let attempt = 0; attempt < 6; attempt++) {
    const canvas = new OffscreenCanvas(width, height);
    const ctx = canvas.getContext('2d');
    ctx.imageSmoothingQuality = 'high';
    ctx.drawImage(bitmap, 0, 0, width, height);
    const out = await canvas.convertToBlob({ type: 'image/jpeg', quality: q });
    const data = toBase64(await out.arrayBuffer());
    if (data.length <= MAX_BASE64) {
      bitmap.close();
      return { data, width, height, bytes: out.size };
    }
    // Over budget even as JPEG (huge full-size page): lower quality first, then pixels.
    if (q > 0.45) q -= 0.15;
    else {
      width = Math.floor(width * 0.75);
      height = Math.floor(height * 0.75);
    }
  }
  bitmap.close();
  throw new Error('the screenshot stays too large even when scaled down');
}
