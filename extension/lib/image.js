// Screenshot sizing. Models see images downscaled anyway; sending more pixels costs tokens
// and frame bytes for nothing. Defaults follow the common 1568 px / 1.15 MP rule.

export const MAX_SIDE = 1568;
export const MAX_PIXELS = 1_150_000;
// The gateway accepts 8 MiB frames; stay well below after base64 (x4/3) and the JSON envelope.
export const MAX_BASE64 = 6 * 1024 * 1024;

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

/** Re-encodes a captured data URL as a JPEG within the size rules; returns {data, width, height}. */
export async function encodeJpeg(dataUrl, { full = false, quality = 0.7 } = {}) {
  // Decoded by hand: the extension's CSP (connect-src) does not allow fetching data: URLs.
  const comma = dataUrl.indexOf(',');
  const raw = atob(dataUrl.slice(comma + 1));
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const blob = new Blob([bytes], { type: dataUrl.slice(5, dataUrl.indexOf(';')) || 'image/jpeg' });
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
