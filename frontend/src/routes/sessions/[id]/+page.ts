// A session's own address, where a notification of a message sent into it
// links (`/sessions/{id}`): the conversation is read and continued on the
// Chat page, so the address leads there.
import { redirect } from '@sveltejs/kit';
import type { PageLoad } from './$types';

export const load: PageLoad = ({ params }) => redirect(307, `/?session=${encodeURIComponent(params.id)}`);
