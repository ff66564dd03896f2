// The words on a page that make a step risky: a click on, a drop onto, a choice of, or a dialog's accept of
// something that says one of them asks the person first (lib/guard.js). They are ours, never the page's: the
// guard says the canonical name of the risk (`risk`, in English) and the words it matched (`said`, from our
// own list), so a card and an error may quote them in openab's voice.
//
// The words of the ten most used languages of the web (Chinese in both its scripts) are matched in any text,
// whatever the page's `lang` says: pages mislabel their language, mix languages, and an English page's account
// menu may be in the person's own language. The lists were chosen so one language's risky word is not an
// everyday harmless word of another (Italian "cancella" is "delete", Spanish "cancelar" is a dialog's Cancel and
// is not listed; "Ordina per" / "Ordenar por" sort a list and are not "order").
//
// How a word matches depends on its script:
// - Alphabetic scripts (Latin, Cyrillic) match whole words, with Unicode-aware edges (JS's `\b` knows only
//   ASCII, so "Payé" would say "pay"): "Deleted items", "Sending tips", "Gelöschte Elemente", "Удалённые" and
//   "Payment history" name no step. Inflections are listed as words: the infinitive and the imperative buttons use
//   ("Comprar", "Compra ahora"), never the participle or the plural noun ("Eliminados", "Envíos").
// - Chinese, Japanese and Korean words match inside text (no spaces between words; Korean glues endings on:
//   "삭제하기"), except where a neighbour makes them a state, a record or a setting rather than a step. Each of
//   these languages has a list of such neighbours: after the word "done/was" (済み, した, 已.. before it, 된, 됨),
//   "history/record/list" (履歴, 记录, 내역), "method/setting/info" (方法, 设置, 정보), "date/time", "person"
//   (者, 人, 자), "in progress" (中); before it "not yet/not/already/pending" (未, 非, 已, 待, 被, 미). So
//   "送信済み" (sent), "削除済みアイテム" (deleted items), "已删除" (deleted), "支付方式" (payment method),
//   "待付款" (awaiting payment), "결제 내역" (payment history) are not risky, while "削除しますか？" (delete?)
//   and "删除" are.
// - Cart words are not risky: adding to a cart buys nothing. Russian "корзина" is both the trash and the cart, so
//   only "переместить в корзину" (move to trash) is listed, never "в корзину" alone ("Добавить в корзину").
//
// Several words at once: the first in the text wins; at the same place, the longest ("登録解除", unsubscribe,
// over "登録", sign up; "in den Papierkorb verschieben" over "Papierkorb").

// A pattern is a regular expression's source: a space in it is any run of white space, an apostrophe either
// apostrophe a page may type; `\s*` where a word may be written apart or together.
const ENGLISH = [
  ['buy', ['buy', 'purchase']],
  ['order', ['order', 'place order']],
  ['checkout', ['checkout', 'check out']],
  ['pay', ['pay']],
  ['send', ['send']],
  ['post', ['post', 'tweet', 'reply']],
  ['publish', ['publish']],
  ['delete', ['delete', 'remove', 'erase']],
  ['trash', ['trash', 'bin', 'discard', 'move to trash', 'move to bin']],
  ['archive', ['archive']],
  ['unsubscribe', ['unsubscribe', 'cancel (?:my |your )?subscription']],
  ['sign in', ['sign[\\s-]*in', 'log[\\s-]*in']],
  ['sign up', ['sign[\\s-]*up', 'register']],
  ['sign out', ['sign[\\s-]*out', 'log[\\s-]*out']],
  ['upload', ['upload']],
  ['transfer', ['transfer', 'withdraw']],
  ['subscribe', ['subscribe']],
];

const SPANISH = [
  ['buy', ['comprar', 'comprar ahora', 'compra ahora', 'compra ya', 'comprar ya']],
  ['order', ['realizar pedido', 'hacer pedido', 'confirmar pedido', 'realizar el pedido', 'hacer el pedido']],
  ['checkout', ['finalizar compra', 'tramitar pedido', 'ir a pagar', 'proceder al pago']],
  ['pay', ['pagar', 'pagar ahora', 'paga ahora']],
  ['send', ['enviar', 'env[ií]a', 'enviar ahora']],
  ['post', ['responder', 'comentar']],
  ['publish', ['publicar', 'publica']],
  ['delete', ['eliminar', 'elimina', 'borrar', 'borra', 'suprimir', 'quitar']],
  ['trash', ['papelera', 'mover a la papelera', 'enviar a la papelera', 'descartar']],
  ['archive', ['archivar']],
  ['unsubscribe', ['cancelar (?:la |mi )?suscripci[oó]n', 'anular (?:la |mi )?suscripci[oó]n', 'darse de baja',
    'darme de baja', 'dar de baja', 'date de baja', 'desuscribirse', 'desuscribirme']],
  ['sign in', ['iniciar sesi[oó]n', 'inicia sesi[oó]n', 'acceder', 'entrar', 'ingresar']],
  ['sign up', ['registrarse', 'reg[ií]strate', 'registrarme', 'crear (?:una )?cuenta']],
  ['sign out', ['cerrar sesi[oó]n', 'cierra sesi[oó]n']],
  ['upload', ['subir (?:un |el )?(?:archivo|archivos|foto|fotos|documento)', 'cargar (?:un |el )?(?:archivo|archivos)']],
  ['transfer', ['transferir', 'hacer (?:una )?transferencia', 'realizar (?:una )?transferencia', 'retirar',
    'retirar dinero']],
  ['subscribe', ['suscribirse', 'suscr[ií]bete', 'suscribirme']],
];

const GERMAN = [
  ['buy', ['kaufen', 'jetzt kaufen']],
  ['order', ['bestellen', 'jetzt bestellen', 'zahlungspflichtig bestellen', 'kostenpflichtig bestellen',
    'bestellung aufgeben', 'bestellung abschicken', 'bestellung absenden', 'bestellung abschließen']],
  ['checkout', ['zur kasse', 'zur kasse gehen', 'kauf abschließen']],
  ['pay', ['bezahlen', 'jetzt bezahlen', 'zahlung bestätigen']],
  ['send', ['senden', 'absenden', 'abschicken', 'versenden', 'verschicken']],
  ['post', ['antworten', 'beitrag posten', 'jetzt posten']],
  ['publish', ['veröffentlichen']],
  ['delete', ['löschen', 'entfernen', 'endgültig löschen']],
  ['trash', ['papierkorb', 'in den papierkorb', 'in den papierkorb verschieben', 'verwerfen']],
  ['archive', ['archivieren']],
  ['unsubscribe', ['abbestellen', 'kündigen', 'abo kündigen', 'abonnement kündigen', 'newsletter abbestellen',
    'vom newsletter abmelden']],
  ['sign in', ['anmelden', 'einloggen']],
  ['sign up', ['registrieren', 'konto erstellen', 'konto anlegen']],
  ['sign out', ['abmelden', 'ausloggen']],
  ['upload', ['hochladen']],
  ['transfer', ['überweisen', 'jetzt überweisen', 'überweisung ausführen', 'auszahlen', 'auszahlung beantragen',
    'abheben', 'geld abheben']],
  ['subscribe', ['abonnieren', 'jetzt abonnieren']],
];

const FRENCH = [
  ['buy', ['acheter', 'acheter maintenant', 'achat immédiat']],
  ['order', ['commander', 'passer (?:la )?commande', 'valider (?:la |ma )?commande', 'finaliser (?:la |ma )?commande']],
  ['checkout', ['valider (?:le |mon )?panier', 'procéder au paiement', 'passer à la caisse']],
  ['pay', ['payer', 'payer maintenant']],
  ['send', ['envoyer']],
  ['post', ['répondre', 'commenter']],
  ['publish', ['publier']],
  ['delete', ['supprimer', 'effacer', 'retirer']],
  ['trash', ['corbeille', 'mettre à la corbeille', 'placer dans la corbeille', 'déplacer vers la corbeille',
    'jeter']],
  ['archive', ['archiver']],
  ['unsubscribe', ['se désabonner', 'désabonner', 'se désinscrire', 'désinscription', 'résilier',
    'résilier (?:l\'|mon )abonnement', 'annuler (?:l\'|mon )abonnement']],
  ['sign in', ['se connecter', 'connexion', 's\'identifier', 'identifiez-vous']],
  ['sign up', ['s\'inscrire', 'inscription', 'créer (?:un )?compte']],
  ['sign out', ['se déconnecter', 'déconnexion']],
  ['upload', ['téléverser']],
  ['transfer', ['transférer', 'virement', 'faire un virement', 'effectuer un virement', 'effectuer un retrait',
    'retirer (?:de l\'argent|des fonds)']],
  ['subscribe', ['s\'abonner', 'abonnez-vous']],
];

const PORTUGUESE = [
  ['buy', ['comprar', 'comprar agora']],
  ['order', ['fazer (?:o )?pedido', 'finalizar (?:o )?pedido', 'confirmar (?:o )?pedido']],
  ['checkout', ['finalizar compra', 'fechar pedido', 'ir para o pagamento']],
  ['pay', ['pagar', 'pagar agora']],
  ['send', ['enviar']],
  ['post', ['responder', 'postar', 'comentar']],
  ['publish', ['publicar']],
  ['delete', ['excluir', 'eliminar', 'apagar', 'remover']],
  ['trash', ['lixeira', 'mover para a lixeira', 'lixo', 'mover para o lixo', 'descartar']],
  ['archive', ['arquivar']],
  ['unsubscribe', ['cancelar (?:a |minha )?inscrição', 'cancelar (?:a |minha )?assinatura', 'descadastrar',
    'desinscrever']],
  ['sign in', ['entrar', 'fazer login', 'iniciar sessão']],
  ['sign up', ['cadastrar', 'cadastre-se', 'cadastrar-se', 'criar (?:uma )?conta', 'registrar', 'registrar-se',
    'registar']],
  ['sign out', ['sair', 'terminar sessão', 'encerrar sessão']],
  ['upload', ['carregar (?:arquivo|ficheiro)', 'enviar (?:arquivo|ficheiro)']],
  ['transfer', ['transferir', 'fazer (?:uma )?transferência', 'sacar', 'levantar dinheiro']],
  ['subscribe', ['inscrever-se', 'inscreva-se', 'assinar']],
];

const ITALIAN = [
  ['buy', ['acquista', 'acquista ora', 'acquistare', 'compra ora', 'compra subito']],
  ['order', ['ordina(?! per)', 'ordina ora', 'effettua (?:l\'|un )ordine', 'procedi all\'ordine', 'conferma (?:l\')?ordine']],
  ['checkout', ['vai alla cassa', 'procedi al pagamento', 'procedi all\'acquisto']],
  ['pay', ['paga', 'paga ora', 'pagare']],
  ['send', ['invia', 'inviare']],
  ['post', ['rispondi', 'commenta']],
  ['publish', ['pubblica', 'pubblicare']],
  ['delete', ['elimina', 'eliminare', 'cancella', 'rimuovi']],
  ['trash', ['cestino', 'sposta nel cestino', 'cestina', 'scarta']],
  ['archive', ['archivia']],
  ['unsubscribe', ['annulla (?:l\')?iscrizione', 'disiscriviti', 'annulla (?:l\')?abbonamento',
    'disdici (?:l\')?abbonamento']],
  ['sign in', ['accedi']],
  ['sign up', ['registrati', 'crea (?:un )?account']],
  ['sign out', ['esci', 'disconnetti']],
  ['upload', ['carica(?! altr| di più| ancora)']],
  ['transfer', ['trasferisci', 'esegui (?:un )?bonifico', 'effettua (?:un )?bonifico', 'preleva']],
  ['subscribe', ['iscriviti', 'abbonati']],
];

const RUSSIAN = [
  ['buy', ['купить', 'купить сейчас']],
  ['order', ['заказать', 'подтвердить заказ']],
  ['checkout', ['оформить заказ', 'перейти к оформлению']],
  ['pay', ['оплатить']],
  ['send', ['отправить']],
  ['post', ['ответить', 'комментировать']],
  ['publish', ['опубликовать', 'разместить объявление']],
  ['delete', ['удалить', 'стереть']],
  ['trash', ['переместить в корзину']],
  ['archive', ['архивировать', 'в архив']],
  ['unsubscribe', ['отписаться', 'отменить подписку', 'отказаться от подписки']],
  ['sign in', ['войти', 'вход']],
  ['sign up', ['зарегистрироваться', 'регистрация']],
  ['sign out', ['выйти', 'выход']],
  ['upload', ['загрузить']],
  ['transfer', ['перевести(?! страницу| текст| на )', 'перевести деньги', 'вывести', 'вывести средства',
    'снять (?:деньги|наличные|средства)']],
  ['subscribe', ['подписаться']],
];

// For a script without spaces: the neighbours that make a listed word a state, a record or a setting.
const JAPANESE = {
  before: '未|非',
  after: '済|履歴|一覧|方法|情報|設定|内容|番号|状況|詳細|日|者|中|先|数|件|完了|鍵|された|した|しました',
  words: [
    ['buy', ['購入', '買う']],
    ['order', ['注文', '注文を確定', '注文する', '発注']],
    ['checkout', ['購入手続き', 'レジに進む', 'お会計', '注文手続き']],
    ['pay', ['支払う', '支払い', '支払(?![いう])', '決済']],
    ['send', ['送信', '送る']],
    ['post', ['投稿', '返信', 'ツイート']],
    ['publish', ['公開']],
    ['delete', ['削除', '消去']],
    ['trash', ['ゴミ箱', 'ごみ箱', 'ゴミ箱に移動', 'ごみ箱に移動', '破棄']],
    ['archive', ['アーカイブ']],
    ['unsubscribe', ['登録解除', '購読解除', '購読を解除', '配信停止', '解約']],
    ['sign in', ['ログイン', 'サインイン']],
    ['sign up', ['新規登録', '会員登録', '登録', 'アカウント作成', 'サインアップ']],
    ['sign out', ['ログアウト', 'サインアウト']],
    ['upload', ['アップロード']],
    ['transfer', ['振込', '振り込み', '振り込む', '振替', '送金', '出金', '引き出す']],
    ['subscribe', ['購読', 'チャンネル登録']],
  ],
};

// Simplified and traditional in one table: a page's script says nothing of its reader.
const CHINESE = {
  before: '已|未|待|被',
  after: '记录|記錄|紀錄|历史|歷史|方式|方法|成功|失败|失敗|时间|時間|日期|状态|狀態|设置|設定|详情|詳情|列表|' +
    '者|人|中|宝|寶|表|数|數|的|线|線',
  words: [
    ['buy', ['购买', '購買', '立即购买', '立即購買', '马上购买']],
    ['order', ['提交订单', '提交訂單', '下单', '下單', '确认订单', '確認訂單']],
    ['checkout', ['结算', '結算', '去结算', '结账', '結帳', '结帐']],
    ['pay', ['支付', '付款', '立即支付', '确认付款', '確認付款']],
    ['send', ['发送', '發送', '傳送', '送出']],
    ['post', ['发帖', '發帖', '发表', '發表', '回复', '回覆', '评论', '評論']],
    ['publish', ['发布', '發布', '發佈']],
    ['delete', ['删除', '刪除']],
    ['trash', ['回收站', '移至回收站', '垃圾桶', '垃圾箱', '资源回收筒', '資源回收筒', '丢弃', '丟棄']],
    ['archive', ['归档', '歸檔', '存档', '存檔', '封存']],
    ['unsubscribe', ['取消订阅', '取消訂閱', '退订', '退訂']],
    ['sign in', ['登录', '登錄', '登入']],
    ['sign up', ['注册', '註冊']],
    ['sign out', ['退出登录', '退出登錄', '退出账号', '退出帳號', '登出', '注销', '註銷']],
    ['upload', ['上传', '上傳']],
    ['transfer', ['转账', '轉帳', '转帐', '轉賬', '汇款', '匯款', '提现', '提現', '提款', '提領']],
    ['subscribe', ['订阅', '訂閱']],
  ],
};

// Korean writes words apart, but glues endings on ("삭제하기", "삭제됨"): its neighbours may follow a space.
const KOREAN = {
  before: '미',
  after: '\\s*(?:내역|기록|목록|완료|되|된|됨|한|중|자|방법|수단|정보|관리|설정|상태|번호|조회|상세)',
  words: [
    ['buy', ['구매', '구입', '바로\\s*구매']],
    ['order', ['주문(?!서)', '주문하기']],
    ['pay', ['결제', '결제하기', '지불']],
    ['send', ['(?<!내)보내기', '전송', '발송']],
    ['post', ['게시(?!판|물|글)', '답장', '댓글\\s*등록']],
    ['publish', ['발행']],
    ['delete', ['삭제', '지우기', '제거', '탈퇴']],
    ['trash', ['휴지통', '폐기']],
    ['archive', ['보관\\s*처리', '보관하기', '아카이브']],
    ['unsubscribe', ['구독\\s*취소', '구독\\s*해지', '수신\\s*거부']],
    ['sign in', ['로그인']],
    ['sign up', ['회원\\s*가입', '가입하기']],
    ['sign out', ['로그아웃']],
    ['upload', ['업로드']],
    ['transfer', ['송금', '이체', '출금', '인출']],
    ['subscribe', ['구독']],
  ],
};

/** The languages listed, by their BCP 47 code. */
export const LANGUAGES = {
  en: ENGLISH, es: SPANISH, de: GERMAN, fr: FRENCH, pt: PORTUGUESE, it: ITALIAN, ru: RUSSIAN,
  ja: JAPANESE, zh: CHINESE, ko: KOREAN,
};

/** The risks, in English: what `riskyWord` may answer as `risk`. */
export const RISKS = ENGLISH.map(([risk]) => risk);

// A word's length as written, for the longest-first order (neighbour conditions and options count as little).
function weight(source) {
  return source.replace(/\(\?<?[!=][^)]*\)/g, '').length;
}

// The words by their first character (lower case), each a sticky expression tried where that character is: a text
// is read once, and only the few words that can start at a place are tried there, longest first. Whole words are
// tried only where a word starts; words of the scripts without spaces anywhere.
const WHOLE = new Map();
const INSIDE = new Map();
(() => {
  // A mark (an accent, an emoji's variation selector) belongs to what it follows.
  const before = '[\\p{L}\\p{N}]\\p{M}*';
  const after = '[\\p{L}\\p{M}\\p{N}]';
  const add = (map, risk, word, source) => {
    // The letters it starts with, compared before the expression is run.
    const prefix = /^[^\\[\]()?*+.|{}^$\s']*/u.exec(word.replace(/^\(\?<!(?:[^()]|\([^()]*\))*\)/, ''))[0].toLowerCase();
    if (!prefix) throw new Error(`risky-words: a word must start with a letter: ${word}`);
    if (!map.has(prefix[0])) map.set(prefix[0], []);
    map.get(prefix[0]).push({ risk, prefix, weight: weight(word), re: new RegExp(source, 'iuy') });
  };
  for (const table of Object.values(LANGUAGES)) {
    if (Array.isArray(table)) {
      for (const [risk, words] of table) {
        for (const w of words) {
          add(WHOLE, risk, w, `(?<!${before})(?:${w.replace(/ /g, '\\s+').replace(/'/g, '[\'’]')})(?!${after})`);
        }
      }
    } else {
      for (const [risk, words] of table.words) {
        for (const w of words) add(INSIDE, risk, w, `(?<!${table.before})(?:${w})(?!${table.after})`);
      }
    }
  }
  for (const map of [WHOLE, INSIDE]) for (const list of map.values()) list.sort((a, b) => b.weight - a.weight);
})();

const WORD_CHAR = /[\p{L}\p{N}]/u;
const MARK = /\p{M}/u;

/**
 * The first risky word in `text` (a label, an option, a dialog's message): `{risk, said}`, or null. `risk` is the
 * step's kind in our words ('delete', 'buy'), one of RISKS; `said` the words of our list that matched, folded to
 * lower case and single spaces ('löschen', '削除'). Pure.
 */
export function riskyWord(text) {
  const s = String(text || '').normalize('NFC').toLowerCase();
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let letter = (c >= 97 && c <= 122) || (c >= 48 && c <= 57);
    if (c >= 128) {
      // The second half of a pair was judged with the first; a mark belongs to what it follows.
      if (c >= 0xdc00 && c <= 0xdfff) continue;
      const ch = c >= 0xd800 && c <= 0xdbff ? String.fromCodePoint(s.codePointAt(i)) : s[i];
      if (MARK.test(ch)) continue;
      letter = WORD_CHAR.test(ch);
    }
    const tries = !inWord && letter ? WHOLE.get(s[i]) : undefined;
    inWord = letter;
    const found = tries && first(tries, s, i) || (c >= 0x3000 && first(INSIDE.get(s[i]), s, i));
    if (found) return found;
  }
  return null;
}

function first(tries, s, i) {
  if (!tries) return null;
  for (const { risk, prefix, re } of tries) {
    if (!s.startsWith(prefix, i)) continue;
    re.lastIndex = i;
    const m = re.exec(s);
    if (m) return { risk, said: m[0].replace(/\s+/g, ' ') };
  }
  return null;
}
