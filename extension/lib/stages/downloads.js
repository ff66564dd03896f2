// Stage 7 of lib/pipeline.js: a download that starts in the agent tab while a call runs there is the agent's, not
// the person's (lib/downloads.js tells them apart by this count).

export async function downloadsActivity(step, next) {
  const downloads = step.parts.files && step.parts.files.downloads;
  if (!downloads) return next();
  downloads.activity(step.tabId, +1);
  try {
    return await next();
  } finally {
    downloads.activity(step.tabId, -1);
  }
}
